"""The policies' accounting: the window a job sees is its share of the destination's renewable
power, and Eq. 2's gain is the grid energy the move saves. Hand-computed numbers throughout."""

from __future__ import annotations

import pytest

from testbed.controller.policy_api import ClusterView, share_window_s
from testbed.policies import make_policy
from testbed.policies.move_energy import move_energy
from tests.unit.policies.policy_support import H, policy_setup as _setup

# b: 3.0 kW for 1 h, 2.0 kW for 2 h more, then 0.5 kW (below one node's 0.75 kW)
B_STEPS = [(0, 3.0), (1, 2.0), (3, 0.5)]


def test_the_window_is_this_jobs_share_after_the_jobs_already_there():
    sc, inputs, cluster = _setup({"a": [(0, 0.0)], "b": B_STEPS}, jobs={"b": 2})
    view = ClusterView(0.0, cluster, inputs)
    # the site's one-node window is 3 h; with 2 jobs there a third needs 3 x 0.75 = 2.25 kW: 1 h
    assert inputs.windows.forecast_remaining_s("b", 0.0) == pytest.approx(3 * H)
    assert view.window_forecast_s("b") == pytest.approx(1 * H)
    # with one job there a second needs 1.5 kW: 3 h
    _, inputs1, cluster1 = _setup({"a": [(0, 0.0)], "b": B_STEPS}, jobs={"b": 1})
    assert ClusterView(0.0, cluster1, inputs1).window_forecast_s("b") == pytest.approx(3 * H)
    # the truth the run records the migration against is the same share
    assert share_window_s(inputs, "b", 0.0, 2, forecast=False) == pytest.approx(1 * H)
    assert share_window_s(inputs, "b", 0.0, 3, forecast=False) == pytest.approx(1 * H)  # 4 x 0.75 = 3.0 kW >= 3.0
    assert share_window_s(inputs, "b", 0.0, 4, forecast=False) == 0.0  # a fifth would need 3.75 kW


def test_jobs_already_moving_there_count_too():
    sc, inputs, cluster = _setup({"a": [(0, 0.0)], "b": B_STEPS}, jobs={"a": 2, "b": 1})
    view = ClusterView(0.0, cluster, inputs)
    assert view.window_forecast_s("b") == pytest.approx(3 * H)
    view.plan_move("a0", "a", "b")  # planned this round: b now has two jobs ahead of the next one
    assert view.window_forecast_s("b") == pytest.approx(1 * H)
    assert view.window_forecast_s("a") == 0.0  # a has no renewable power at all


def test_the_share_carries_the_sites_forecast_error():
    _, inputs, cluster = _setup({"a": [(0, 0.0)], "b": B_STEPS}, bias_frac=0.2, jobs={"b": 2})
    assert inputs.windows.forecast_remaining_s("b", 0.0) == pytest.approx(3 * H * 1.2)
    assert ClusterView(0.0, cluster, inputs).window_forecast_s("b") == pytest.approx(1 * H * 1.2)


def test_eq2_gain_is_the_grid_energy_the_move_saves():
    # a: 1.0 kW renewable, two jobs (0.75 kW each, no grid limit): the second gets 0.25 kW of it
    sc, inputs, cluster = _setup({"a": [(0, 1.0)], "b": B_STEPS}, jobs={"a": 2, "b": 2})
    view = ClusterView(0.0, cluster, inputs)
    job = view.running_jobs("a")[1]
    e = move_energy(view, job, "b", cost_kwh=0.016, src_topup_kw=None)
    assert e.src_power_kw == pytest.approx(0.75)
    assert e.src_renewable_kw == pytest.approx(0.25)
    assert e.saved_kw == pytest.approx(0.5)
    assert e.run_s == pytest.approx(1 * H)  # b's share for a third job: 1 h (< 6 h of work left)
    assert e.gain_kwh == pytest.approx(0.5)  # not the full node credit 0.75 kW x 1 h
    assert e.pays_off() and e.pays_off(margin=30.0) and not e.pays_off(margin=31.0)  # 0.5 / 0.016 = 31.25


def test_eq2_gain_uses_the_jobs_power_at_its_cap():
    # grid limit 0.3 kW: each of the two jobs at a gets (1.0 + 0.3) / 2 = 0.65 kW (linear profile)
    sc, inputs, cluster = _setup({"a": [(0, 1.0)], "b": B_STEPS}, grid_limit_kw=0.3, jobs={"a": 2})
    view = ClusterView(0.0, cluster, inputs)
    job = view.running_jobs("a")[1]
    e = move_energy(view, job, "b", cost_kwh=0.0, src_topup_kw=0.3)
    assert e.src_power_kw == pytest.approx(0.65)
    assert e.src_renewable_kw == pytest.approx(0.35)  # 1.0 - 0.65 left after the other job
    assert e.saved_kw == pytest.approx(0.3)  # = the site's grid draw, which the move removes
    assert e.run_s == pytest.approx(3 * H)  # b is empty: a job's share is the one-node window, 3 h
    assert e.gain_kwh == pytest.approx(0.9)


def test_the_remaining_time_bounds_the_gain():
    sc, inputs, cluster = _setup({"a": [(0, 0.0)], "b": B_STEPS}, jobs={"a": 1})
    cluster.jobs["a0"].work_left_gpu_h = 0.5
    view = ClusterView(0.0, cluster, inputs)
    e = move_energy(view, view.running_jobs("a")[0], "b", cost_kwh=0.0, src_topup_kw=None)
    assert e.run_s == pytest.approx(0.5 * H) and e.gain_kwh == pytest.approx(0.75 * 0.5)


def test_feasibility_aware_records_and_filters_on_the_share_and_the_gain():
    # 120 GB over 10 Gbit/s: 96 s transfer, E_cost = 1.8 kW x 96 s = 0.048 kWh. At a the job on
    # grid gets 0.74 kW of renewables (0.01 kW saved): over b's 1 h share it saves 0.01 kWh < 0.048.
    sc, inputs, cluster = _setup({"a": [(0, 1.49)], "b": B_STEPS}, jobs={"a": 2, "b": 2}, checkpoint_gb=120.0)
    policy = make_policy(sc.policies[0], sc)
    view = ClusterView(0.0, cluster, inputs)
    (cand,) = policy._candidates(view, view.running_jobs("a")[1], "a")
    assert cand.prediction.window_s == pytest.approx(1 * H)  # b's share, not its 3 h one-node window
    assert cand.eq1_ok  # 106.7 s < 0.1 x 3600 s
    assert cand.score("cost_kwh") == pytest.approx(0.048)
    assert cand.score("gain_kwh") == pytest.approx(0.01, abs=1e-6)
    assert not cand.eq2_ok  # the paper's breakeven (3.8 min < 1 h) would have passed it
    moves, records = policy.decide(view)
    assert moves == [] and records[-1].kind == "stay"


def test_the_run_records_each_migration_against_its_own_share():
    from testbed.controller.controller import Controller
    from testbed.controller.policy_api import Move
    from testbed.substrate.sim import SimSubstrate
    from testbed.workload import JobSubmission

    sc, inputs, _ = _setup({"a": [(0, 0.0)], "b": B_STEPS}, policies=("energy_only",))
    with SimSubstrate(inputs) as sub:
        ctl = Controller(inputs, make_policy(sc.policies[0], sc), sub)
        for i, site in enumerate(["b", "b", "a"]):
            ctl.cluster.admit(JobSubmission(f"j{i}", "m", 40.0, 6.0, 0.0, site), site, 0.0)
        ctl.cluster.start_queued(0.0)
        rec = ctl._record_for(Move("j2", "a", "b", "test"), 0.0)  # energy_only: the reference prediction
    assert rec.true_window_s == pytest.approx(1 * H)  # two jobs at b: a third gets 1 h, not b's 3 h
    assert rec.predicted.window_s == pytest.approx(1 * H)
    assert rec.true_budget_s == pytest.approx(0.1 * H)
