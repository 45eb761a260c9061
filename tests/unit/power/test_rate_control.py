"""The closed-loop throughput controller against a simulated plant, in simulated time (no clock)."""

from __future__ import annotations

import pytest

from testbed.power.throttle.rate_control import FREE, PACED, RateController, RateSettings
from tests.unit.power.rate_plant import Plant


def _windows(plant: Plant, ctl: RateController, t0: float, t1: float, width_s: float = 1.0):
    """Achieved steps/s over every ``width_s`` window starting in [t0, t1] (0.1 s apart), leaving
    out windows that cut a probe or its pay-back (its extra steps, then a pause) in two."""
    out = []
    k = 0
    while t0 + 0.1 * k <= t1 + 1e-9:
        a = t0 + 0.1 * k
        b = a + width_s
        k += 1
        if any(a < p_end + 1.0 and b > p_start for p_start, p_end, _ in ctl.probe_log):
            continue
        out.append((a, plant.rate(a, b)))
    return out


@pytest.mark.parametrize("factor", [1.3, 1 / 1.3])
def test_a_30_percent_step_cost_change_is_followed_within_3_s(factor):
    plant = Plant(cost_s=0.005, cold=0.1)  # paced steps 10 % slower than back-to-back ones
    ctl = RateController(0.0)
    plant.run(ctl, 30.0, {1.0: {"frac": 0.5}, 10.0: {"cost_s": 0.005 * factor}})
    before = 0.5 / 0.005
    after = 0.5 / (0.005 * factor)  # frac x the new unthrottled (back-to-back) rate
    early = _windows(plant, ctl, 3.0, 8.5)
    late = _windows(plant, ctl, 12.0, 28.0)  # windows that end >= 3 s after the change
    assert len(early) > 30 and len(late) > 100
    for a, r in early:
        assert r == pytest.approx(before, rel=0.05), (a, r)
    for a, r in late:
        assert r == pytest.approx(after, rel=0.05), (a, r)
    assert ctl.target_steps_per_s == pytest.approx(after, rel=0.02)


def test_less_cpu_left_by_other_load_lowers_the_target():
    plant = Plant(cost_s=0.004, cold=0.05)
    ctl = RateController(0.0)
    plant.run(ctl, 20.0, {1.0: {"frac": 0.3}, 8.0: {"share": 0.6}})
    for a, r in _windows(plant, ctl, 11.0, 18.0):
        assert r == pytest.approx(0.3 * 0.6 / 0.004, rel=0.05), (a, r)


def test_probes_correct_what_step_times_cannot_see():
    """Paced steps get slower while back-to-back ones do not (more cold-cache cost): the step
    times alone would lower the reference; the next probe measures it back."""
    plant = Plant(cost_s=0.005, cold=0.1)
    ctl = RateController(0.0, settings=RateSettings(probe_every_s=4.0))
    plant.run(ctl, 30.0, {1.0: {"frac": 0.4}, 10.0: {"cold": 0.4}})
    assert ctl.probes >= 4
    last_probe_end = max(e for s, e, _ in ctl.probe_log if s > 10.0)
    probes_after = [p for p in ctl.probe_log if p[0] > 10.0]
    assert probes_after, "no probe after the change"
    # over whole probe cycles (probe, pay-back and paced steps) the mean rate is the target
    first = probes_after[0][0]
    cycles = [p[0] for p in ctl.probe_log if p[0] >= first]
    mean = plant.rate(cycles[1], cycles[-1])
    assert mean == pytest.approx(0.4 / 0.005, rel=0.05), (mean, ctl.probe_log)
    assert last_probe_end > 20.0


def test_a_late_loop_catches_up_at_most_the_backlog():
    plant = Plant(cost_s=0.002)
    ctl = RateController(0.0, settings=RateSettings(probe_every_s=1e9))
    plant.run(ctl, 2.0, {1.0: {"frac": 0.5}})
    plant.cost_s = 1.0  # one step that takes a second (a stall)
    plant.run(ctl, 2.01)
    plant.cost_s = 0.002
    n0 = len(plant.ends)
    plant.run(ctl, plant.t_s + 0.5)
    burst = len(plant.ends) - n0
    target = 0.5 / 0.002
    # the backlog (0.5 s of schedule) plus the half second itself, not the whole missed second
    assert burst <= target * (0.5 + 0.5) + 2
    assert burst >= target * 0.5


def test_window_reports_the_enforced_fraction():
    plant = Plant(cost_s=0.005)
    ctl = RateController(0.0)
    plant.run(ctl, 1.0)
    w = ctl.window()
    assert w.enforced_frac == pytest.approx(1.0) and w.frac == 1.0 and w.intervals == w.steps - 1
    plant.run(ctl, 11.0, {1.0: {"frac": 0.25}})
    w = ctl.window()
    assert w.frac == 0.25 and w.enforced_frac == pytest.approx(0.25, rel=0.03)
    assert w.steps_per_s == pytest.approx(0.25 * 200, rel=0.03)
    ctl.set_frac(0.25, plant.t_s)  # the same frac again: the window goes on
    assert ctl.window().steps == w.steps
    ctl.hold(plant.t_s)
    plant.t_s += 5.0  # paused: not in the window
    ctl.release(plant.t_s)
    plant.run(ctl, plant.t_s + 1.0)
    assert ctl.window().enforced_frac == pytest.approx(0.25, rel=0.03)
    assert ctl.window().as_dict()["requested_frac"] == 0.25


def test_a_ceiling_is_the_reference_and_needs_no_probes():
    plant = Plant(cost_s=0.005)
    ctl = RateController(0.0, ceiling_steps_per_s=5.0)
    plant.run(ctl, 30.0, {2.0: {"frac": 0.5}})
    assert ctl.mode == PACED and ctl.probes == 0
    assert plant.rate(10.0, 30.0) == pytest.approx(2.5, abs=0.1)
    assert plant.rate(0.0, 2.0) == pytest.approx(5.0, abs=0.6)


def test_a_ceiling_the_host_cannot_reach_is_measured():
    plant = Plant(cost_s=0.4)  # 2.5 steps/s at most, though the pace would be 5
    ctl = RateController(0.0, ceiling_steps_per_s=5.0)
    plant.run(ctl, 60.0, {5.0: {"frac": 0.5}})
    assert ctl.reference_steps_per_s == pytest.approx(2.5, rel=0.05)
    assert plant.rate(30.0, 60.0) == pytest.approx(1.25, rel=0.1)


def test_quota_follows_the_target_and_lifts_when_unthrottled():
    plant = Plant(cost_s=0.005)
    ctl = RateController(0.0)
    plant.run(ctl, 1.0)
    assert ctl.quota_cores() is None and ctl.mode == FREE
    plant.run(ctl, 4.0, {1.0: {"frac": 0.5}})
    assert ctl.quota_cores() == pytest.approx(1.25 * 100 * 0.005, rel=0.05)
    ctl.set_frac(1.0, plant.t_s)
    assert ctl.quota_cores() is None and ctl.mode == FREE


def test_bad_fractions_are_refused():
    ctl = RateController(0.0)
    for bad in (0.0, -0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="frac"):
            ctl.set_frac(bad, 0.0)
    with pytest.raises(ValueError, match="ceiling"):
        RateController(0.0, ceiling_steps_per_s=0.0)
