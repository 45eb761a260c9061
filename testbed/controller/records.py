"""Rows the controller records. Predictions and measurements sit side by side, so that
validating the feasibility model is a join, not a re-computation."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class Prediction:
    """What the model said at decision time, from the forecasts the controller had."""

    bandwidth_gbps: float
    window_s: float
    transfer_s: float
    load_s: float
    downtime_s: float
    total_s: float
    budget_s: float
    feasible: bool
    feasibility_class: str
    paper_class: str
    e_cost_kwh: float
    breakeven_min: float
    p_window_ok: float | None
    risk_feasible: bool | None
    alpha: float
    corrections: str


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
        d = asdict(self)
        pred = d.pop("predicted")
        d.update({f"predicted_{k}" if not k.startswith("p_") else k: v for k, v in pred.items()})
        return d


@dataclass
class DecisionRecord:
    """One evaluation by a policy: inputs, predicted times per candidate, choice and reason."""

    t_s: float
    policy: str
    kind: str  # place | migrate | stay
    job_id: str
    src: str | None
    dst: str | None
    reason: str
    n_candidates: int = 0
    n_feasible: int = 0
    candidates: list[dict] = field(default_factory=list)

    def row(self) -> dict:
        import json

        d = asdict(self)
        d["candidates"] = json.dumps(self.candidates, sort_keys=True, separators=(",", ":"))
        return d
