"""The controller's record of one migration. Prediction and measurement sit side by side, so
that validating the feasibility model is a join, not a re-computation."""

from __future__ import annotations

from dataclasses import dataclass, fields

from testbed.feasibility import Prediction
from testbed.recorder.tables import dtypes_of
from testbed.substrate.base import MigrationOutcome


MEASURED, MODELLED, PARTLY_MEASURED = "measured", "modelled", "partly measured"
"""``outcome_basis``: every phase measured, none, or some (the total then counts as modelled)."""


def outcome_basis(measured: set[str], phases) -> str:
    """How a migration's outcome was obtained, from the phases that were measured."""
    if measured >= set(phases):
        return MEASURED
    return PARTLY_MEASURED if measured else MODELLED


# What a move answered (``trigger``; testbed.controller.policy_api.Move.trigger): a renewable window at
# the destination (Eq. 1's budget, alpha x that window, applies: a move can overrun it), or a grid signal,
# carbon intensity or price, with no window and so no budget to overrun.
WINDOW, CARBON, PRICE = "window", "carbon", "price"
TRIGGERS = (WINDOW, CARBON, PRICE)


# column of migrations.parquet: the Prediction attribute it holds. ``predicted_*`` are the
# deterministic Eq. 1 terms and verdict on the forecasts; the risk budget's are ``p_window_ok`` and
# ``predicted_risk_feasible`` (null without one).
_PREDICTION_COLUMNS = {
    "predicted_bandwidth_gbps": "bandwidth_gbps",
    "predicted_window_s": "window_s",
    "predicted_transfer_s": "transfer_s",
    "predicted_load_s": "load_s",
    "predicted_downtime_s": "downtime_s",
    "predicted_total_s": "total_s",
    "predicted_budget_s": "nominal_budget_s",
    "predicted_feasible": "nominal_feasible",
    "predicted_feasibility_class": "nominal_class",
    "predicted_paper_class": "paper_class",
    "predicted_e_cost_kwh": "e_cost_kwh",
    "predicted_breakeven_s": "breakeven_min",  # x 60: every duration of the table in seconds
    "p_window_ok": "p_window_ok",
    "predicted_risk_feasible": "risk_feasible",
    "predicted_alpha": "alpha",
    "predicted_corrections": "corrections",  # joined with ","
}


def prediction_columns(p: Prediction) -> dict:
    """A prediction as ``migrations.parquet`` columns."""
    row = {column: getattr(p, attr) for column, attr in _PREDICTION_COLUMNS.items()}
    row["predicted_corrections"] = ",".join(p.corrections)
    row["predicted_breakeven_s"] = 60.0 * p.breakeven_min
    return row


@dataclass
class MigrationRecord:
    policy: str
    job_id: str
    family: str
    src: str
    dst: str
    checkpoint_gb: float
    t_decision_s: float
    reason: str
    predicted: Prediction
    # the truth at decision time (not seen by the controller)
    true_window_s: float
    true_budget_s: float
    # what the move answered (policy_api.Move.trigger): ``window``, a renewable window at the destination
    # (Eq. 1's budget applies), or ``carbon`` / ``price``, a grid signal: no window, so no budget, and the
    # verdicts below stay null (a move without a budget cannot overrun one)
    trigger: str = WINDOW
    # the bandwidth the prediction assumed (feasibility.bandwidth_basis: nominal, fair_share, probe) and,
    # for probe, the probe's scenario seconds and bytes: charged to the migration (it starts probe_s after
    # the decision, and completed_in_window / within_budget count probe_s)
    predicted_bandwidth_basis: str = "nominal"
    probe_s: float | None = None
    probe_bytes: int | None = None
    # what happened. ``outcome_*``: the realised phases on every substrate alike, and ``outcome_basis``
    # how they were obtained: ``measured`` (an emulated substrate: phases scaled back to the real
    # checkpoint size at measured throughputs) or ``modelled`` (the analytic substrate). ``actual_*``
    # hold measurements only: the same values where measured, null where modelled (see :meth:`finish`).
    status: str = "in_flight"
    outcome_basis: str | None = None
    outcome_checkpoint_s: float | None = None
    outcome_transfer_s: float | None = None
    outcome_load_s: float | None = None
    outcome_downtime_s: float | None = None
    outcome_total_s: float | None = None
    outcome_goodput_gbps: float | None = None
    actual_checkpoint_s: float | None = None
    checkpoint_file_bytes: int | None = None
    actual_transfer_s: float | None = None
    actual_load_s: float | None = None
    actual_downtime_s: float | None = None
    actual_total_s: float | None = None
    actual_goodput_gbps: float | None = None
    # how the measurement was made: bytes really written and read back (the scaled checkpoint), the
    # sample the disk throughputs were measured on (those, topped up to a minimum), the measured save /
    # load throughputs, the control plane's delay (scenario s) and own time (wall s)
    measured_io_bytes: int | None = None
    io_sample_bytes: int | None = None
    save_mb_per_s: float | None = None
    load_mb_per_s: float | None = None
    start_lag_s: float | None = None
    control_s: float | None = None
    # the host during the measurement (cores; testbed.substrate.emulated.host_load); null on sim
    host_cpu_cores: float | None = None
    own_cpu_cores: float | None = None
    other_cpu_cores: float | None = None
    steal_cpu_cores: float | None = None
    contended: bool | None = None
    completed_in_window: bool | None = None
    within_budget: bool | None = None
    overran: bool | None = None
    detail: str = ""

    def finish(self, out: MigrationOutcome) -> None:
        """File an outcome: every phase as ``outcome_*``, and as ``actual_*`` too where it was measured;
        the total and goodput are measured only when every phase was (``outcome_basis``)."""
        self.status = out.status
        measured = set(out.phases_measured)
        phases = {"checkpoint": out.checkpoint_s, "transfer": out.transfer_s, "load": out.load_s,
                  "downtime": out.downtime_s}
        for name, value in phases.items():
            setattr(self, f"outcome_{name}_s", value)
            if name in measured:
                setattr(self, f"actual_{name}_s", value)
        if "checkpoint" in measured:
            self.checkpoint_file_bytes = out.checkpoint_bytes
        self.outcome_total_s, self.outcome_goodput_gbps = out.total_s, out.goodput_gbps
        self.outcome_basis = outcome_basis(measured, phases)
        if self.outcome_basis == MEASURED:
            self.actual_total_s, self.actual_goodput_gbps = out.total_s, out.goodput_gbps
        self.measured_io_bytes = out.io_bytes
        self.io_sample_bytes = out.io_sample_bytes
        self.save_mb_per_s = None if out.save_bytes_per_s is None else out.save_bytes_per_s / 1e6
        self.load_mb_per_s = None if out.load_bytes_per_s is None else out.load_bytes_per_s / 1e6
        self.start_lag_s = out.start_lag_s
        self.control_s = out.control_wall_s
        if out.host_load is not None:
            h = out.host_load
            self.host_cpu_cores, self.own_cpu_cores = h.host_cores, h.own_cores
            self.other_cpu_cores, self.steal_cpu_cores, self.contended = h.other_cores, h.steal_cores, h.contended
        if self.trigger == WINDOW:  # a move on a grid signal had no window: nothing to judge it against
            charged = out.total_s + (self.probe_s or 0.0)  # a probe before the move counts against its budget
            self.completed_in_window = out.status == "completed" and charged <= self.true_window_s
            self.within_budget = out.status == "completed" and charged < self.true_budget_s
            self.overran = not self.within_budget
        self.detail = out.detail

    def row(self) -> dict:
        """One row of ``migrations.parquet``: the record's fields, then the prediction's columns."""
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "predicted"}
        d.update(prediction_columns(self.predicted))
        return d


MIGRATION_COLUMNS = [f.name for f in fields(MigrationRecord) if f.name != "predicted"] + list(_PREDICTION_COLUMNS)
"""The columns of ``migrations.parquet``, in order."""


def _prediction_dtypes() -> dict[str, str]:
    attrs = dtypes_of(Prediction)
    out = {column: attrs.get(attr, "float64") for column, attr in _PREDICTION_COLUMNS.items()}
    out.update(predicted_corrections="str", predicted_breakeven_s="float64")
    return out


MIGRATION_DTYPES = {**dtypes_of(MigrationRecord, skip=("predicted",)), **_prediction_dtypes()}
"""The dtype of every column of ``migrations.parquet`` (the same whether or not a value was measured)."""
