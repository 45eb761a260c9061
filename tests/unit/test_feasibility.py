"""Feasibility model (Eq. 1 / Eq. 2 of arXiv 2511.16182): the seed's arithmetic, classes, risk, corrections."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from testbed.feasibility import (
    TCP_EFFICIENCY_MTU1500,
    Corrections,
    FeasibilityParams,
    assess,
    breakeven_min,
    budget_s,
    energy_cost_kwh,
    feasibility_class,
    max_size_gb,
    migration_total_s,
    paper_class,
    prob_window_at_least,
    risk_adjusted_window_s,
    size_for_transfer_time_gb,
    slow_start_penalty_s,
    transfer_time_s,
)

WINDOW_2H30_S = 2.5 * 3600
PAPER = FeasibilityParams()
WITH_CORRECTIONS = FeasibilityParams(corrections=Corrections(protocol_efficiency=TCP_EFFICIENCY_MTU1500, rtt_ms=40))


# ---------------------------------------------------------------- the seed's arithmetic


def test_40gb_at_10gbps_matches_section_iv_d():
    a = assess(40, 10, WINDOW_2H30_S)
    assert a.transfer_s == 32.0
    assert a.e_cost_kwh == pytest.approx(0.016)
    assert a.breakeven_min == pytest.approx(1.28)
    assert a.feasible and a.feasibility_class == "A" and a.paper_class == "A"


def test_budget_is_900_s_for_a_2h30_window():
    assert budget_s(WINDOW_2H30_S, 0.1) == pytest.approx(900.0)


def test_100gb_at_1gbps_is_feasible_although_the_paper_labels_it_c():
    a = assess(100, 1, WINDOW_2H30_S)
    assert a.transfer_s == 800.0
    assert a.total_s == pytest.approx(810.7)
    assert a.feasible and a.margin_s == pytest.approx(89.3)
    assert a.paper_class == "C"
    assert a.feasibility_class == "B"  # at half the bandwidth it would need 1600 s


def test_280gb_at_10gbps_is_feasible_although_the_paper_calls_it_infeasible():
    a = assess(280, 10, WINDOW_2H30_S)
    assert a.transfer_s == 224.0
    assert a.budget_s == pytest.approx(900.0)
    assert a.feasible
    assert a.feasibility_class == "A"  # 448 s + 10.7 s < 900 s even at 5 Gbit/s
    # The paper's own 60/300 s cut-offs give B; its Table IV/VII say C / infeasible.
    assert a.paper_class == "B"


def test_energy_units():
    assert energy_cost_kwh(1.8, 3600) == pytest.approx(1.8)
    assert breakeven_min(0.75, 0.75) == pytest.approx(60.0)


# ---------------------------------------------------------------- classes


@pytest.mark.parametrize(
    ("transfer_s", "label"), [(0, "A"), (59.999, "A"), (60, "B"), (299.999, "B"), (300, "C"), (1e6, "C")]
)
def test_paper_class_cutoffs(transfer_s, label):
    assert paper_class(transfer_s) == label


def test_class_follows_the_window_not_fixed_cutoffs():
    # The same 100 GB @ 1 Gbit/s migration: infeasible in 1 h, feasible in 2.5 h, robust in 5 h.
    assert feasibility_class(100, 1, 3600, PAPER) == "C"
    assert feasibility_class(100, 1, WINDOW_2H30_S, PAPER) == "B"
    assert feasibility_class(100, 1, 5 * 3600, PAPER) == "A"


@pytest.mark.parametrize("params", [PAPER, WITH_CORRECTIONS], ids=["paper", "corrected"])
@pytest.mark.parametrize("bandwidth_gbps", [0.5, 1, 10, 40])
def test_class_boundaries(params, bandwidth_gbps):
    frac = params.robust_degradation_frac
    eq1_gb = max_size_gb(bandwidth_gbps, WINDOW_2H30_S, params)
    robust_gb = max_size_gb(bandwidth_gbps * (1 - frac), WINDOW_2H30_S, params)
    assert 0 < robust_gb < eq1_gb
    assert feasibility_class(eq1_gb, bandwidth_gbps, WINDOW_2H30_S, params) == "C"  # Eq. 1 is strict
    assert feasibility_class(eq1_gb * (1 - 1e-9), bandwidth_gbps, WINDOW_2H30_S, params) == "B"
    assert feasibility_class(robust_gb * (1 + 1e-9), bandwidth_gbps, WINDOW_2H30_S, params) == "B"
    assert feasibility_class(robust_gb * (1 - 1e-9), bandwidth_gbps, WINDOW_2H30_S, params) == "A"


def test_no_degradation_margin_means_no_class_b():
    params = FeasibilityParams(robust_degradation_frac=0.0)
    boundary_gb = max_size_gb(1, WINDOW_2H30_S, params)
    assert feasibility_class(boundary_gb * 0.999, 1, WINDOW_2H30_S, params) == "A"
    assert feasibility_class(boundary_gb * 1.001, 1, WINDOW_2H30_S, params) == "C"


def test_class_c_iff_infeasible():
    for size_gb in (1, 10, 100, 500, 1000, 5000):
        for bandwidth_gbps in (0.1, 1, 10, 100):
            a = assess(size_gb, bandwidth_gbps, WINDOW_2H30_S)
            assert (a.feasibility_class == "C") == (not a.feasible)
            assert a.feasible == (a.margin_s > 0)


# ---------------------------------------------------------------- Eq. 1 boundary


def test_max_size_closed_form():
    assert max_size_gb(10, WINDOW_2H30_S, PAPER) == pytest.approx((900 - 10.7) * 10 / 8)


@pytest.mark.parametrize("params", [PAPER, WITH_CORRECTIONS], ids=["paper", "corrected"])
@pytest.mark.parametrize(("bandwidth_gbps", "window_s"), [(0.1, 3600), (1, WINDOW_2H30_S), (10, 1800), (100, 86400)])
def test_max_size_consistent_with_assess(params, bandwidth_gbps, window_s):
    boundary_gb = max_size_gb(bandwidth_gbps, window_s, params)
    assert boundary_gb > 0
    assert assess(boundary_gb * (1 - 1e-9), bandwidth_gbps, window_s, params).feasible
    assert not assess(boundary_gb * (1 + 1e-9), bandwidth_gbps, window_s, params).feasible
    assert not assess(boundary_gb, bandwidth_gbps, window_s, params).feasible  # Eq. 1 is strict


def test_max_size_zero_when_load_and_downtime_use_the_budget():
    assert max_size_gb(100, 100, PAPER) == 0.0  # budget 10 s < 10.7 s of load + downtime
    assert max_size_gb(100, 50, PAPER) == 0.0


def test_size_for_transfer_time_inverts_transfer_time():
    corrections = WITH_CORRECTIONS.corrections
    size_gb = size_for_transfer_time_gb(300, 10, corrections)
    assert transfer_time_s(size_gb * (1 - 1e-9), 10, corrections) < 300 <= transfer_time_s(size_gb, 10, corrections)


# ---------------------------------------------------------------- corrections


def test_corrections_off_by_default():
    assert Corrections().names() == []
    assert FeasibilityParams().corrections == Corrections()
    assert assess(40, 10, WINDOW_2H30_S).corrections == []
    assert transfer_time_s(40, 10) == 8 * 40 / 10


def test_correction_names():
    assert WITH_CORRECTIONS.corrections.names() == ["protocol_efficiency", "slow_start"]


@pytest.mark.parametrize("efficiency", [TCP_EFFICIENCY_MTU1500, 0.5, 1.0])
def test_protocol_efficiency_lengthens_time_by_its_inverse(efficiency):
    plain_s = transfer_time_s(40, 10)
    assert transfer_time_s(40, 10, Corrections(protocol_efficiency=efficiency)) == pytest.approx(plain_s / efficiency)


def test_tcp_efficiency_value():
    assert TCP_EFFICIENCY_MTU1500 == pytest.approx(0.9564, abs=1e-4)


def test_slow_start_penalty_worked_example():
    # 1 Gbit/s = 125e6 B/s, RTT 10 ms: BDP 1.25e6 B. Windows 14480 B * 2^k stay below it for k = 0..6,
    # so 7 slow-start rounds send 14480 * 127 B; penalty = 1 RTT handshake + 7 RTT - sent / rate.
    expected_s = 0.010 + 7 * 0.010 - 14480 * 127 / 125e6
    assert slow_start_penalty_s(1e9, 1, 10) == pytest.approx(expected_s)


def test_slow_start_transfer_ending_in_slow_start():
    # One segment: handshake + one round, minus the line-rate time of that segment.
    assert slow_start_penalty_s(1448, 1, 10) == pytest.approx(0.020 - 1448 / 125e6)


@given(
    size_bytes=st.floats(0, 1e13),
    bandwidth_gbps=st.floats(0.01, 400),
    rtt_ms=st.floats(0.01, 500),
    init_cwnd=st.integers(1, 100),
)
def test_slow_start_penalty_positive_and_bounded(size_bytes, bandwidth_gbps, rtt_ms, init_cwnd):
    penalty_s = slow_start_penalty_s(size_bytes, bandwidth_gbps, rtt_ms, init_cwnd)
    rtt_s = rtt_ms / 1000
    bdp_segments = bandwidth_gbps * 1e9 / 8 * rtt_s / 1448
    max_rounds = max(0, math.ceil(math.log2(bdp_segments / init_cwnd))) + 1 if bdp_segments > init_cwnd else 0
    assert 0 < penalty_s
    assert penalty_s >= rtt_s * (1 - 1e-12)
    assert penalty_s <= rtt_s * (1 + max_rounds) * (1 + 1e-12)


def test_slow_start_zero_rtt_is_free():
    assert slow_start_penalty_s(40e9, 10, 0) == 0.0
    assert transfer_time_s(40, 10, Corrections(rtt_ms=0)) == transfer_time_s(40, 10)


def test_corrections_bring_40gb_close_to_table_iii():
    # Table III quotes 34 s where 8*S/B gives 32 s: TCP framing alone explains most of the gap.
    corrected_s = transfer_time_s(40, 10, Corrections(protocol_efficiency=TCP_EFFICIENCY_MTU1500, rtt_ms=50))
    assert 33 < corrected_s < 35


# ---------------------------------------------------------------- risk budget


def test_prob_window_deterministic_without_noise():
    assert prob_window_at_least(900, 1000, 0.0) == 1.0
    assert prob_window_at_least(1000, 1000, 0.0) == 1.0
    assert prob_window_at_least(1001, 1000, 0.0) == 0.0
    # A forecast 25 % too long: the true window is 800 s.
    assert prob_window_at_least(800, 1000, 0.0, bias_frac=0.25) == 1.0
    assert prob_window_at_least(801, 1000, 0.0, bias_frac=0.25) == 0.0


def test_prob_window_is_half_at_the_median():
    assert prob_window_at_least(1000 / 1.25, 1000, 0.3, bias_frac=0.25) == pytest.approx(0.5)


@pytest.mark.parametrize(("noise_frac", "epsilon", "bias_frac"), [(0.1, 0.05, 0.0), (0.5, 0.2, 0.3), (1.0, 0.01, -0.4)])
def test_risk_adjusted_window_is_the_epsilon_quantile(noise_frac, epsilon, bias_frac):
    w_s = risk_adjusted_window_s(10_000, noise_frac, epsilon, bias_frac)
    assert prob_window_at_least(w_s, 10_000, noise_frac, bias_frac) == pytest.approx(1 - epsilon)


@pytest.mark.parametrize("size_gb", [10, 100, 1111.625 * (1 - 1e-9), 1111.625, 2000])
@pytest.mark.parametrize("epsilon", [0.01, 0.1, 0.5])
def test_epsilon_without_noise_equals_deterministic(size_gb, epsilon):
    plain = assess(size_gb, 10, WINDOW_2H30_S)
    risky = assess(size_gb, 10, WINDOW_2H30_S, epsilon=epsilon, window_noise_frac=0.0)
    assert risky.feasible == plain.feasible
    assert risky.feasibility_class == plain.feasibility_class
    assert risky.budget_s == plain.budget_s
    assert risky.p_window_ok in (0.0, 1.0)


sizes = st.floats(0.1, 3000)
bandwidths = st.floats(0.1, 100)
windows = st.floats(600, 86400)
noises = st.floats(0, 2)
epsilons = st.floats(1e-4, 0.5)


@given(sizes, bandwidths, windows, noises, noises, epsilons)
def test_more_noise_never_makes_a_migration_more_feasible(size_gb, bandwidth_gbps, window_s, noise_a, noise_b, epsilon):
    low, high = sorted((noise_a, noise_b))
    at_low = assess(size_gb, bandwidth_gbps, window_s, epsilon=epsilon, window_noise_frac=low)
    at_high = assess(size_gb, bandwidth_gbps, window_s, epsilon=epsilon, window_noise_frac=high)
    assert at_high.budget_s <= at_low.budget_s
    assert not at_high.feasible or at_low.feasible
    assert "ABC".index(at_high.feasibility_class) >= "ABC".index(at_low.feasibility_class)


@given(sizes, bandwidths, windows, noises, epsilons, epsilons)
def test_smaller_epsilon_never_makes_a_migration_more_feasible(size_gb, bandwidth_gbps, window_s, noise, eps_a, eps_b):
    strict, loose = sorted((eps_a, eps_b))
    at_strict = assess(size_gb, bandwidth_gbps, window_s, epsilon=strict, window_noise_frac=noise)
    at_loose = assess(size_gb, bandwidth_gbps, window_s, epsilon=loose, window_noise_frac=noise)
    assert not at_strict.feasible or at_loose.feasible
    assert "ABC".index(at_strict.feasibility_class) >= "ABC".index(at_loose.feasibility_class)


@given(sizes, bandwidths, windows, st.floats(0.01, 2), epsilons)
def test_risk_feasible_iff_probability_meets_the_budget(size_gb, bandwidth_gbps, window_s, noise, epsilon):
    a = assess(size_gb, bandwidth_gbps, window_s, epsilon=epsilon, window_noise_frac=noise)
    if abs(a.p_window_ok - (1 - epsilon)) > 1e-9:  # away from the boundary the two statements agree
        assert a.feasible == (a.p_window_ok >= 1 - epsilon)


def test_risk_fields_only_with_epsilon():
    plain = assess(40, 10, WINDOW_2H30_S)
    assert plain.epsilon is None and plain.p_window_ok is None and plain.risk_window_s is None
    risky = assess(280, 10, WINDOW_2H30_S, epsilon=0.1, window_noise_frac=0.3)
    assert risky.epsilon == 0.1
    assert risky.risk_window_s < WINDOW_2H30_S
    assert risky.budget_s == pytest.approx(0.1 * risky.risk_window_s)
    assert 0.9 <= risky.p_window_ok <= 1.0


def test_no_window_is_infeasible():
    assert not assess(1, 100, 0.0).feasible
    a = assess(1, 100, 0.0, epsilon=0.1, window_noise_frac=0.3)
    assert not a.feasible and a.p_window_ok == 0.0 and a.risk_window_s == 0.0


def test_noise_without_epsilon_is_an_error():
    with pytest.raises(ValueError, match="epsilon"):
        assess(40, 10, WINDOW_2H30_S, window_noise_frac=0.2)


@pytest.mark.parametrize("epsilon", [0.0, 0.51, 1.0, -0.1])
def test_epsilon_range(epsilon):
    with pytest.raises(ValueError, match="epsilon"):
        risk_adjusted_window_s(1000, 0.1, epsilon)


# ---------------------------------------------------------------- parameters and output


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"alpha": 0}, "alpha"),
        ({"alpha": 1.5}, "alpha"),
        ({"alpha": float("nan")}, "alpha"),
        ({"t_load_s": -1}, "t_load_s"),
        ({"t_downtime_s": -0.1}, "t_downtime_s"),
        ({"p_sys_kw": 0}, "p_sys_kw"),
        ({"p_node_kw": -1}, "p_node_kw"),
        ({"robust_degradation_frac": 1.0}, "robust_degradation_frac"),
        ({"robust_degradation_frac": -0.1}, "robust_degradation_frac"),
    ],
)
def test_params_validation_names_the_field(kwargs, name):
    with pytest.raises(ValueError, match=f"^{name}:"):
        FeasibilityParams(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"protocol_efficiency": 0}, "protocol_efficiency"), ({"protocol_efficiency": 1.1}, "protocol_efficiency"),
     ({"rtt_ms": -1}, "rtt_ms"), ({"init_cwnd_segments": 0}, "init_cwnd_segments"), ({"mss_bytes": 0}, "mss_bytes")],
)
def test_corrections_validation_names_the_field(kwargs, name):
    with pytest.raises(ValueError, match=f"^{name}:"):
        Corrections(**kwargs)


@pytest.mark.parametrize(("size_gb", "bandwidth_gbps"), [(-1, 10), (40, 0), (40, -1), (float("inf"), 10)])
def test_transfer_time_rejects_bad_input(size_gb, bandwidth_gbps):
    with pytest.raises(ValueError):
        transfer_time_s(size_gb, bandwidth_gbps)


def test_migration_total_is_the_eq1_left_hand_side():
    assert migration_total_s(40, 10, PAPER) == pytest.approx(32 + 10.3 + 0.4)


def test_assessment_to_dict_is_json_ready():
    d = assess(280, 10, WINDOW_2H30_S, WITH_CORRECTIONS, epsilon=0.1, window_noise_frac=0.2).to_dict()
    assert json.loads(json.dumps(d)) == d
    for key in ("transfer_s", "total_s", "budget_s", "margin_s", "feasible", "feasibility_class", "paper_class",
                "e_cost_kwh", "breakeven_min", "epsilon", "p_window_ok", "corrections"):
        assert key in d
    assert d["corrections"] == ["protocol_efficiency", "slow_start"]


# -- the risk budget with an uncertain bandwidth (union bound) ------------------------------------
def test_bandwidth_noise_makes_the_risk_verdict_more_conservative():
    from testbed.feasibility import FeasibilityParams, assess

    p = FeasibilityParams(alpha=0.1)
    # 100 GB at 10 Gbit/s: 80 s + 10.7 s; a 1000 s window gives a 100 s budget
    base = assess(100, 10, 1000, p, epsilon=0.1, window_noise_frac=0.0)
    hedged = assess(100, 10, 1000, p, epsilon=0.1, window_noise_frac=0.0, bandwidth_noise_frac=0.3)
    assert base.feasible and not hedged.feasible
    assert hedged.transfer_s == base.transfer_s  # the point prediction is unchanged
    z = 1.6448536269514722  # z_{0.95}: epsilon/2 = 0.05 for the bandwidth
    import math

    assert hedged.risk_total_s == pytest.approx(800 / (10 * math.exp(-0.3 * z)) + 10.7, rel=1e-9)
    # zero bandwidth noise is exactly the old rule
    same = assess(100, 10, 1000, p, epsilon=0.1, window_noise_frac=0.2, bandwidth_noise_frac=0.0)
    old = assess(100, 10, 1000, p, epsilon=0.1, window_noise_frac=0.2)
    assert same == old


def test_bandwidth_noise_needs_a_risk_budget():
    from testbed.errors import SpecError
    from testbed.feasibility import assess
    from testbed.spec import scenario_from_dict
    from tests.conftest import small_scenario_dict

    with pytest.raises(ValueError, match="epsilon"):
        assess(10, 1, 1000, bandwidth_noise_frac=0.2)
    d = small_scenario_dict(policies=[{"name": "feasibility_aware", "assumed_bandwidth_noise_pct": 20}])
    with pytest.raises(SpecError, match="assumed_bandwidth_noise_pct: needs a risk budget"):
        scenario_from_dict(d)


def test_a_load_time_that_grows_with_size_enters_eq1_and_its_boundary():
    from testbed.feasibility import FeasibilityParams, assess, max_size_gb, migration_total_s

    paper = FeasibilityParams()
    measured = FeasibilityParams(t_load_s=0.5, t_load_s_per_gb=1.8)
    assert measured.load_s(40.0) == pytest.approx(0.5 + 72.0)
    p = assess(40.0, 10.0, 9000.0, measured)
    assert p.load_s == pytest.approx(72.5) and p.total_s == pytest.approx(32.0 + 72.5 + 0.4)
    assert assess(40.0, 10.0, 9000.0, paper).load_s == 10.3  # the paper's constant, any size
    # the boundary: (alpha W - fixed - downtime) / (8/B + s_per_gb), and Eq. 1 flips exactly there
    edge = max_size_gb(10.0, 9000.0, measured)
    assert edge == pytest.approx((900.0 - 0.5 - 0.4) / (0.8 + 1.8), rel=1e-9)
    assert migration_total_s(edge, 10.0, measured) >= 900.0 > migration_total_s(edge * (1 - 1e-9), 10.0, measured)
    assert edge < max_size_gb(10.0, 9000.0, FeasibilityParams(t_load_s=0.5))
    with pytest.raises(ValueError, match="t_load_s_per_gb"):
        FeasibilityParams(t_load_s_per_gb=-1.0)


def test_the_scenario_model_carries_the_per_gb_load_to_every_policy():
    from testbed.feasibility import FeasibilityParams
    from testbed.spec.policies import FeasibilityModel, FeasibilityOverrides

    model = FeasibilityModel(t_load_s=0.2, t_load_s_per_gb=1.5)
    assert FeasibilityOverrides().feasibility_model(model).t_load_s_per_gb == 1.5
    assert FeasibilityOverrides(t_load_s_per_gb=0.0).feasibility_model(model).t_load_s_per_gb == 0.0
    params = FeasibilityParams.from_model(model, rtt_ms=50.0, p_sys_kw=1.8, p_node_kw=0.75)
    assert params.load_s(100.0) == pytest.approx(150.2)


def test_the_vectorised_transfer_time_is_the_scalar_one_over_arrays():
    import numpy as np
    import pandas as pd

    from testbed.feasibility import TCP_EFFICIENCY_MTU1500, Corrections, transfer_time_s, transfer_times_s

    size = pd.Series([0.0, 1.5, 24.0, 260.0])
    bw = pd.Series([10.0, 0.5, 1.0, 2.5])
    for eff in (None, TCP_EFFICIENCY_MTU1500):
        got = transfer_times_s(size, bw, eff)
        want = [transfer_time_s(s, b, Corrections(protocol_efficiency=eff)) for s, b in zip(size, bw)]
        assert np.allclose(got.to_numpy(), want, rtol=1e-12, atol=0)
    assert transfer_times_s(pd.Series([24.0]), pd.Series([0.0]))[0] == np.inf  # no check: a zero rate gives inf
