"""The emulated power backend: a profile's model behind the device contract, on a fake clock."""

from __future__ import annotations

import pytest

from testbed.power import PowerDevice, PowerError, PowerLimitOutOfRange, PowerNode
from testbed.power.gpu.modelled_gpu import ModelledGpu, EmulatedNode
from testbed.power.gpu.profile import PowerProfile, ProfilePoint

PROFILE = PowerProfile("toy", 100.0, 300.0, 300.0, 20.0,
                       (ProfilePoint(100, 0.5, 100), ProfilePoint(200, 0.8, 180), ProfilePoint(300, 1.0, 250)),
                       source="test")


class Clock:
    def __init__(self):
        self.t_s = 0.0

    def __call__(self) -> float:
        return self.t_s


class RecordingThrottle:
    kind = "fake"

    def __init__(self):
        self.calls: list[float | None] = []

    def set_cores(self, cores, *, period_us=None):
        self.calls.append(cores)


def test_contract_and_limits():
    dev = ModelledGpu(PROFILE, index=2, clock=Clock())
    assert isinstance(dev, PowerDevice) and dev.name == "emu2"
    lim = dev.limits_w()
    assert (lim.min_w, lim.max_w, lim.default_w) == (100, 300, 300)
    assert dev.enforced_limit_w() == 300


def test_set_limit_checks_range_and_enforces_the_request():
    dev = ModelledGpu(PROFILE, clock=Clock())
    for bad in (99.9, 300.1, float("nan")):
        with pytest.raises(PowerLimitOutOfRange):
            dev.set_limit_w(bad)
    assert dev.enforced_limit_w() == 300  # unchanged by the refusals
    dev.set_limit_w(150)
    assert dev.enforced_limit_w() == 150
    assert dev.throughput_frac() == pytest.approx(0.65)
    assert dev.power_w() == pytest.approx(140)


def test_energy_integrates_modelled_power_and_never_decreases():
    clock = Clock()
    dev = ModelledGpu(PROFILE, busy=True, clock=clock)
    clock.t_s = 10.0
    assert dev.energy_j() == pytest.approx(2500)  # 10 s at draw_w(300) = 250 W
    dev.set_limit_w(100)
    clock.t_s = 20.0
    assert dev.energy_j() == pytest.approx(2500 + 1000)
    dev.set_busy(False)
    clock.t_s = 30.0
    assert dev.power_w() == 20
    assert dev.energy_j() == pytest.approx(3500 + 200)
    clock.t_s = 25.0  # a clock that steps back adds nothing and removes nothing
    assert dev.energy_j() == pytest.approx(3700)


def test_measure_window_on_the_fake_clock():
    clock = Clock()
    dev = ModelledGpu(PROFILE, clock=clock)
    dev.set_limit_w(200)
    with dev.measure("step") as w:
        clock.t_s += 4.0
    assert w.measurement.t_s == 4.0
    assert w.measurement.energy_j == pytest.approx(720)
    assert w.measurement.mean_power_w == pytest.approx(180)


def test_busy_callback_is_read_at_each_reading():
    clock, state = Clock(), {"busy": False}
    dev = ModelledGpu(PROFILE, busy=lambda: state["busy"], clock=clock)
    assert dev.power_w() == 20
    state["busy"] = True
    assert dev.power_w() == 250
    with pytest.raises(PowerError, match="callback"):
        dev.set_busy(False)


def test_throttle_follows_the_cap_and_setting_is_idempotent():
    th = RecordingThrottle()
    dev = ModelledGpu(PROFILE, throttle=th, reference_cores=2.0, clock=Clock())
    assert th.calls == [None]  # the default cap is uncapped
    dev.set_limit_w(200)
    dev.set_limit_w(200)
    assert th.calls == [None, pytest.approx(1.6)]
    dev.set_limit_w(300)
    assert th.calls[-1] is None
    with pytest.raises(PowerError):
        ModelledGpu(PROFILE, reference_cores=0)


def test_node_splits_caps_sums_readings_and_restores_defaults():
    clock = Clock()
    throttles = [RecordingThrottle(), RecordingThrottle()]
    with EmulatedNode(PROFILE, 2, throttles=throttles, clock=clock) as node:
        assert isinstance(node, PowerNode) and node.name == "emu0+emu1"
        assert node.limits_w().max_w == 600
        node.set_limit_w(400)
        assert [d.enforced_limit_w() for d in node.devices] == [200, 200]
        assert node.power_w() == pytest.approx(360)
        assert [t.calls[-1] for t in throttles] == [pytest.approx(0.8)] * 2
        with pytest.raises(PowerLimitOutOfRange):
            node.set_limit_w(100)  # 50 W each is below min_w
        clock.t_s = 2.0
        assert node.energy_j() == pytest.approx(720)
    assert node.enforced_limit_w() == 600 and [t.calls[-1] for t in throttles] == [None, None]
    with pytest.raises(PowerError):
        EmulatedNode(PROFILE, 0)
    with pytest.raises(PowerError, match="throttles"):
        EmulatedNode(PROFILE, 2, throttles=[RecordingThrottle()])
