"""The controller's record of one migration. Prediction and measurement sit side by side, so
that validating the feasibility model is a join, not a re-computation."""

from __future__ import annotations

from dataclasses import dataclass, fields

from testbed.feasibility import Prediction
from testbed.recorder.tables import dtypes_of
from testbed.substrate.base import MigrationOutcome


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
    # what happened. ``actual_*``: measured on an emulated substrate (phases scaled back to the real
    # checkpoint size at measured throughputs); ``model_*``: the analytic substrate's modelled truth.
    # A phase is in one family or the other, never both (see :meth:`finish`).
    status: str = "in_flight"
    actual_checkpoint_s: float | None = None
    actual_checkpoint_bytes: int | None = None
    actual_transfer_s: float | None = None
    actual_load_s: float | None = None
    actual_downtime_s: float | None = None
    actual_total_s: float | None = None
    actual_goodput_gbps: float | None = None
    model_checkpoint_s: float | None = None
    model_transfer_s: float | None = None
    model_load_s: float | None = None
    model_downtime_s: float | None = None
    model_total_s: float | None = None
    model_goodput_gbps: float | None = None
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
        """File an outcome: measured phases as ``actual_*``, modelled ones as ``model_*``; the total
        and goodput are ``actual_*`` only when every phase was measured."""
        self.status = out.status
        measured = set(out.phases_measured)
        phases = {"transfer": out.transfer_s, "load": out.load_s, "downtime": out.downtime_s}
        for name, value in phases.items():
            setattr(self, f"{'actual' if name in measured else 'model'}_{name}_s", value)
        if "checkpoint" in measured:
            self.actual_checkpoint_s, self.actual_checkpoint_bytes = out.checkpoint_s, out.checkpoint_bytes
        else:  # the sim's modelled write at the source (0 where none is modelled: io_model constant)
            self.model_checkpoint_s = out.checkpoint_s
        whole = "actual" if measured >= set(phases) else "model"
        setattr(self, f"{whole}_total_s", out.total_s)
        setattr(self, f"{whole}_goodput_gbps", out.goodput_gbps)
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
        self.completed_in_window = out.status == "completed" and out.total_s <= self.true_window_s
        self.within_budget = out.status == "completed" and out.total_s < self.true_budget_s
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
