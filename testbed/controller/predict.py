"""The feasibility model applied to one candidate move, from the forecasts a policy sees."""

from __future__ import annotations

from testbed.controller.records import Prediction
from testbed.feasibility import TCP_EFFICIENCY_MTU1500, Corrections, FeasibilityParams, assess
from testbed.spec.policies import FeasibilityModel


def params_from(model: FeasibilityModel, *, rtt_ms: float, p_sys_kw: float, p_node_kw: float) -> FeasibilityParams:
    corr = Corrections(
        protocol_efficiency=TCP_EFFICIENCY_MTU1500 if "protocol_efficiency" in model.corrections else None,
        rtt_ms=rtt_ms if "slow_start" in model.corrections else None,
    )
    return FeasibilityParams(
        alpha=model.alpha, t_load_s=model.t_load_s, t_downtime_s=model.t_downtime_s, p_sys_kw=p_sys_kw,
        p_node_kw=p_node_kw, robust_degradation_frac=model.robust_degradation_frac, corrections=corr,
    )


def predict(
    size_gb: float,
    bandwidth_gbps: float,
    window_s: float,
    params: FeasibilityParams,
    *,
    epsilon: float | None = None,
    noise_frac: float = 0.0,
    bandwidth_noise_frac: float = 0.0,
) -> Prediction:
    """Deterministic Eq. 1 always; with ``epsilon`` also the risk-budget verdict."""
    a = assess(size_gb, bandwidth_gbps, window_s, params)
    risk = p_ok = None
    if epsilon is not None:
        r = assess(size_gb, bandwidth_gbps, window_s, params, epsilon=epsilon, window_noise_frac=noise_frac,
                   bandwidth_noise_frac=bandwidth_noise_frac)
        risk, p_ok = r.feasible, r.p_window_ok
    return Prediction(
        bandwidth_gbps=bandwidth_gbps, window_s=window_s, transfer_s=a.transfer_s, load_s=a.load_s,
        downtime_s=a.downtime_s, total_s=a.total_s, budget_s=a.budget_s, feasible=a.feasible,
        feasibility_class=a.feasibility_class, paper_class=a.paper_class, e_cost_kwh=a.e_cost_kwh,
        breakeven_min=a.breakeven_min, p_window_ok=p_ok, risk_feasible=risk, alpha=params.alpha,
        corrections=",".join(a.corrections),
    )
