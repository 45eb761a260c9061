"""The report's transfer calibration: which transfers it fits, the fit's intervals, and refusals."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from testbed.analysis import calibration, degradation
from testbed.analysis.validation import add_concurrency
from testbed.feasibility import TCP_EFFICIENCY_MTU1500, Corrections, transfer_time_s

LINKS = [("rome", "milan", 10.0, 12.0), ("rome", "vienna", 5.0, 18.0), ("milan", "vienna", 2.0, 9.0),
         ("vienna", "madrid", 1.0, 40.0)]
RESOLVED = {"links": [{"a": a, "b": b, "bandwidth_gbps": g, "bandwidth_b_to_a_gbps": None} for a, b, g, _ in LINKS],
            "traces": {"bandwidth": {"steady_degradation_pct": 0.0,
                                     "events": [{"link": "*", "start_h": 100.0, "duration_h": 50.0,
                                                 "degradation_pct": 35.0}]}}}


def physical_transfers(n: int = 48, seed: int = 0, noise: float = 0.01) -> pd.DataFrame:
    """Emulated-looking transfers from the physical model (TCP goodput over MTU 1500 + handshake and
    slow start from the link's RTT) with multiplicative noise, one at a time, before hour 100."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        a, b, gbps, rtt_ms = LINKS[i % len(LINKS)]
        size = float(rng.choice([8.0, 40.0, 120.0, 400.0]))
        t = transfer_time_s(size, gbps, Corrections(TCP_EFFICIENCY_MTU1500, rtt_ms=rtt_ms)) * (1 + rng.normal(0, noise))
        rows.append({"run": 0, "label": "p", "substrate": "netns", "status": "completed", "src": a, "dst": b,
                     "checkpoint_gb": size, "predicted_bandwidth_gbps": gbps, "t_decision_s": i * 7000.0,
                     "actual_transfer_s": t, "actual_total_s": t + 10.7})
    assert rows[-1]["t_decision_s"] + 4000 < 100 * 3600
    return pd.DataFrame(rows)


def prepared(m: pd.DataFrame, resolved: dict = RESOLVED) -> pd.DataFrame:
    return add_concurrency(degradation.mark(m, resolved))


def test_fit_over_undegraded_transfers_recovers_tcp_efficiency_and_a_non_negative_ramp():
    clean = physical_transfers()
    # the same links degraded by 35 % (an event from hour 100), transfers flagged as contended, and
    # two transfers sharing a link at once: each would drag the efficiency down if it were fitted
    degraded = physical_transfers(24, seed=1).assign(
        t_decision_s=lambda d: 100 * 3600.0 + d.index * 7000.0,
        actual_transfer_s=lambda d: d["actual_transfer_s"] / 0.65)
    contended = physical_transfers(8, seed=2).assign(t_decision_s=lambda d: 400 * 3600.0 + d.index * 7000.0,
                                                     actual_transfer_s=lambda d: d["actual_transfer_s"] * 1.4,
                                                     contended=True)
    shared = physical_transfers(2, seed=3).assign(t_decision_s=500 * 3600.0, src="rome", dst="milan",
                                                  predicted_bandwidth_gbps=10.0, checkpoint_gb=400.0,
                                                  actual_transfer_s=700.0, actual_total_s=710.0)
    m = prepared(pd.concat([clean, degraded, contended, shared], ignore_index=True))
    cal = calibration.calibrate(m)
    assert cal.excluded == {"degraded link": 24, "contended host": 8, "another transfer on the same link": 2}
    assert cal.n == len(clean) and cal.proposed, cal.refused
    assert abs(cal.protocol_efficiency - TCP_EFFICIENCY_MTU1500) < 0.02
    assert cal.fit.intercept >= 0
    lo, hi = cal.efficiency_ci
    assert lo < cal.protocol_efficiency < hi and hi - lo < 0.05
    assert cal.fit.intercept_ci[0] < cal.fit.intercept < cal.fit.intercept_ci[1]
    # what the filter is for: fitted over everything, the efficiency is off by far more than 0.02
    everything = calibration.calibrate(m.assign(degraded=False, contended=False, same_link_overlaps=0))
    assert abs(everything.protocol_efficiency - TCP_EFFICIENCY_MTU1500) > 0.05


def test_contended_column_may_be_absent():
    cal = calibration.calibrate(prepared(physical_transfers()))
    assert "contended" not in prepared(physical_transfers()).columns
    assert cal.proposed and cal.excluded["contended host"] == 0


def test_four_points_are_refused_and_say_why():
    cal = calibration.calibrate(prepared(physical_transfers(4)))
    assert not cal.proposed and any("only 4 usable transfers" in r for r in cal.refused)
    text = "\n".join(calibration.markdown(cal))
    assert "No substrate block is proposed" in text and "protocol_efficiency:" not in text


def test_degraded_only_input_is_refused():
    m = prepared(physical_transfers(30).assign(t_decision_s=lambda d: 100 * 3600.0 + d.index * 1000.0))
    assert m["degraded"].all()
    cal = calibration.calibrate(m)
    assert not cal.proposed and cal.fit is None and "degraded link: 30" in cal.refused[0]


def test_negative_ramp_and_implausible_efficiency_are_refused():
    x = np.linspace(20, 400, 30)
    base = pd.DataFrame({"substrate": "netns", "status": "completed", "checkpoint_gb": x * 10 / 8,
                         "predicted_bandwidth_gbps": 10.0})
    neg = calibration.calibrate(base.assign(actual_transfer_s=x / 0.95 - 5.0))
    assert not neg.proposed and any("negative ramp" in r for r in neg.refused)
    slow = calibration.calibrate(base.assign(actual_transfer_s=x / 0.3 + 2.0))
    assert not slow.proposed and any("outside [0.5, 1]" in r for r in slow.refused)
    fine = calibration.calibrate(base.assign(actual_transfer_s=x / 0.95 + 2.0))
    assert fine.proposed and fine.protocol_efficiency == pytest.approx(0.95)


def test_sweep_degradation_under_any_parameter_name_is_found_per_migration():
    m = physical_transfers(6).assign(**{"param_deg": 35})
    steady = {**RESOLVED, "traces": {"bandwidth": {"steady_degradation_pct": 35.0, "events": []}}}
    assert degradation.mark(m, steady)["degraded"].all()
    # events: only the transfers that overlap one on their link
    ev = {**RESOLVED, "traces": {"bandwidth": {"steady_degradation_pct": 0.0, "events": [
        {"link": "milan-rome", "start_h": 0.0, "duration_h": 1.0, "degradation_pct": 35.0}]}}}
    marked = degradation.mark(m, ev)
    assert marked["degraded"].tolist() == [True, False, False, False, False, False]
    assert marked.loc[0, "degradation_kind"] == "event" and marked.loc[0, "nominal_bandwidth_gbps"] == 10.0
    # no resolved scenario in the manifest: the swept parameter, whatever its name
    assert degradation.mark(m, {})["degraded"].all()
    assert not degradation.mark(m.assign(**{"param_deg": 0}), {})["degraded"].any()
