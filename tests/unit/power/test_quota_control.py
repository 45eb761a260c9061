"""The closed-loop CPU quota for a user's program (testbed.power.throttle.quota_control), against a
simulated program in simulated time (tests/unit/power/quota_plant.py): the controller only reads the
step counter and sets the quota, as the agent does with a real program's progress lines."""

from __future__ import annotations

import pytest

from testbed.power.throttle.quota_control import CONTROL, FREE, QuotaController
from tests.unit.power.quota_plant import Program


def _throttled(prog: Program, frac: float = 0.5, *, t_set: float = 3.0, until: float = 20.0,
               events: dict | None = None) -> tuple[QuotaController, float]:
    ctl = QuotaController(0.0, cores_max=2.0)
    prog.run(ctl, t_set)
    ref = prog.rate(1.0, t_set)
    prog.run(ctl, until, {t_set: {"frac": frac}, **(events or {})})
    return ctl, ref


@pytest.mark.parametrize("kw", [dict(cost_s=0.005), dict(cost_s=0.02), dict(cost_s=0.005, share=0.5),
                                dict(cost_s=0.005, pace=20.0)],
                         ids=["fast", "slower-steps", "background-load", "self-paced"])
def test_holds_half_the_unthrottled_rate(kw):
    prog = Program(**kw)
    ctl, ref = _throttled(prog)
    assert ctl.reference_steps_per_s == pytest.approx(ref, rel=0.05)
    assert prog.rate(6.0, 20.0) / ref == pytest.approx(0.5, abs=0.03)  # probes and their pay-back included
    w = ctl.window()
    assert w.frac == 0.5 and w.enforced_frac == pytest.approx(0.5, abs=0.03)
    assert ctl.probes >= 2 and ctl.mode in (CONTROL, "probe")


def test_follows_a_step_cost_that_drifts_and_load_that_arrives():
    """Mid-run each step costs 30 % more and other load takes 40 % of the core: the reference is
    re-measured by the probes and the rate returns to half of the *new* unthrottled rate."""
    prog = Program(cost_s=0.005)
    ctl, ref0 = _throttled(prog, until=40.0, events={15.0: {"cost_s": 0.0065, "share": 0.6}})
    ref1 = prog.unthrottled_rate()
    assert ref1 == pytest.approx(ref0 * 0.6 / 1.3, rel=0.05)
    assert ctl.reference_steps_per_s == pytest.approx(ref1, rel=0.08)
    assert prog.rate(25.0, 40.0) / ref1 == pytest.approx(0.5, abs=0.04)
    # without re-measuring, the old target would be more than this program can now do at all
    assert 0.5 * ref0 > 0.9 * ref1


def test_a_lower_cap_lowers_the_rate_in_proportion():
    prog = Program(cost_s=0.005)
    ctl, ref = _throttled(prog, 0.8, until=12.0, events={12.0: {"frac": 0.3}})
    prog.run(ctl, 26.0, {12.0: {"frac": 0.3}})
    assert prog.rate(6.0, 12.0) / ref == pytest.approx(0.8, abs=0.04)
    assert prog.rate(16.0, 26.0) / ref == pytest.approx(0.3, abs=0.03)
    assert ctl.window().frac == 0.3 and ctl.window().enforced_frac == pytest.approx(0.3, abs=0.03)


def test_unthrottled_means_no_quota_and_enforced_one():
    prog = Program(cost_s=0.005)
    ctl = QuotaController(0.0, cores_max=2.0)
    prog.run(ctl, 3.0)
    assert ctl.mode == FREE and ctl.quota_cores() is None
    assert ctl.window().enforced_frac == pytest.approx(1.0)
    assert ctl.reference_steps_per_s == pytest.approx(prog.rate(1.0, 3.0), rel=0.05)
    with pytest.raises(ValueError, match="frac must be in"):
        ctl.set_frac(0.0, 3.0)
    with pytest.raises(ValueError, match="cores_max"):
        QuotaController(0.0, cores_max=0)


def test_a_checkpoint_pause_and_a_restart_are_not_counted():
    """Held (the program stopped for a checkpoint): no time, no steps; a restart from an older
    checkpoint (a lower step) is a new baseline, not a negative rate."""
    ctl = QuotaController(0.0, cores_max=1.0)
    t, step = 0.0, 0
    for _ in range(100):  # 100 steps/s unthrottled
        t += 0.05
        step += 5
        ctl.observe(t, step)
    ctl.set_frac(0.5, t)
    w0 = ctl.window()
    ctl.hold(t)
    ctl.observe(t + 10.0, step)  # ignored while held
    ctl.release(t + 10.0)
    for i in range(40):  # restarted from step 100 (an older checkpoint), at 50 steps/s
        ctl.observe(t + 10.0 + 0.05 * i, 100 + int(2.5 * i))
    w = ctl.window()
    assert w.seconds == pytest.approx(0.05 * 38, abs=0.06) and w0.seconds == 0.0
    assert w.enforced_frac == pytest.approx(0.5, abs=0.05)


def test_the_controller_is_what_holds_it():
    """The same program with the quota frozen at its first guess misses the target: the loop, not
    the guess, makes the difference."""
    prog = Program(cost_s=0.005, share=0.5)
    ctl = QuotaController(0.0, cores_max=2.0)
    prog.run(ctl, 3.0)
    ref = prog.rate(1.0, 3.0)
    ctl.set_frac(0.5, 3.0)
    frozen = ctl.quota_cores()
    assert frozen == pytest.approx(1.0)  # frac x the host's 2 cores: no CPU reading was passed in
    twin = Program(cost_s=0.005, share=0.5)

    class Frozen:
        def observe(self, *a, **k): ...
        def quota_cores(self): return frozen
    twin.run(Frozen(), 10.0)
    assert twin.rate(3.0, 10.0) / ref > 0.9  # the guess does not bite at all
