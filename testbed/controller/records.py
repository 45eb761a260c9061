"""The controller's record of one migration. Prediction and measurement sit side by side, so
that validating the feasibility model is a join, not a re-computation."""

from __future__ import annotations

from dataclasses import dataclass, fields

from testbed.feasibility import Prediction


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
    "predicted_breakeven_min": "breakeven_min",
    "p_window_ok": "p_window_ok",
    "predicted_risk_feasible": "risk_feasible",
    "predicted_alpha": "alpha",
    "predicted_corrections": "corrections",  # joined with ","
}


def prediction_columns(p: Prediction) -> dict:
    """A prediction as ``migrations.parquet`` columns."""
    row = {column: getattr(p, attr) for column, attr in _PREDICTION_COLUMNS.items()}
    row["predicted_corrections"] = ",".join(p.corrections)
    return row


@dataclass
class MigrationRecord:
    policy: str
    job_id: str
    family: str
    src: str
    dst: str
    size_gb: float
    t_decision_s: float
    reason: str
    predicted: Prediction
    # the truth at decision time (not seen by the controller)
    true_window_s: float
    true_budget_s: float
    # what happened
    status: str = "in_flight"
    actual_checkpoint_s: float | None = None
    actual_checkpoint_bytes: int | None = None
    actual_transfer_s: float | None = None
    actual_load_s: float | None = None
    actual_downtime_s: float | None = None
    actual_total_s: float | None = None
    actual_goodput_gbps: float | None = None
    completed_in_window: bool | None = None
    within_budget: bool | None = None
    overran: bool | None = None
    detail: str = ""

    def row(self) -> dict:
        """One row of ``migrations.parquet``: the record's fields, then the prediction's columns."""
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "predicted"}
        d.update(prediction_columns(self.predicted))
        return d


MIGRATION_COLUMNS = [f.name for f in fields(MigrationRecord) if f.name != "predicted"] + list(_PREDICTION_COLUMNS)
"""The columns of ``migrations.parquet``, in order."""
