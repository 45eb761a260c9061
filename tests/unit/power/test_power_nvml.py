"""NVML power backend, with every NVML call mocked by autospec (no GPU needed)."""

from __future__ import annotations

from unittest import mock

import pytest

pynvml = pytest.importorskip("pynvml", reason="nvidia-ml-py is not installed")

from testbed import errors as tb_errors  # noqa: E402
from testbed.power import (  # noqa: E402
    CapNotEnforced, PowerError, PowerLibraryNotFound, PowerLimitOutOfRange, PowerNotSupported,
    PowerPermissionError, map_nvml_error,
)
from testbed.power.gpu import nvml as nvml_backend  # noqa: E402
from testbed.power.gpu.nvml import NvmlDevice, NvmlNode, nvml_available  # noqa: E402

from tests.unit.power.nvml_support import NVML_FUNCS as FUNCS  # noqa: E402


class Gpu:
    """The state behind one mocked GPU, in NVML's units (mW, mJ)."""

    def __init__(self, limit_mw=300_000, min_mw=100_000, max_mw=400_000, default_mw=350_000):
        self.limit_mw, self.min_mw, self.max_mw, self.default_mw = limit_mw, min_mw, max_mw, default_mw
        self.enforce = True  # False: the driver ignores sets (another limit in force)
        self.power_mw = 150_000
        self.energy_mj: int | None = 5_000_000  # None: NOT_SUPPORTED


def err(code):
    return pynvml.NVMLError(code)


@pytest.fixture
def gpus():
    return [Gpu(limit_mw=300_000), Gpu(limit_mw=250_000)]


@pytest.fixture
def nv(gpus):
    """Patch every NVML function we use (autospec) and back them with ``gpus``."""
    with mock.patch.multiple(pynvml, **{f: mock.DEFAULT for f in FUNCS}, autospec=True) as m:
        m["nvmlDeviceGetCount"].side_effect = lambda: len(gpus)
        m["nvmlDeviceGetHandleByIndex"].side_effect = lambda i: gpus[i]
        m["nvmlDeviceGetPowerManagementLimitConstraints"].side_effect = lambda g: [g.min_mw, g.max_mw]
        m["nvmlDeviceGetPowerManagementDefaultLimit"].side_effect = lambda g: g.default_mw
        m["nvmlDeviceGetPowerManagementLimit"].side_effect = lambda g: g.limit_mw

        def set_limit(g, mw):
            if g.enforce:
                g.limit_mw = mw
        m["nvmlDeviceSetPowerManagementLimit"].side_effect = set_limit
        m["nvmlDeviceGetEnforcedPowerLimit"].side_effect = lambda g: g.limit_mw
        m["nvmlDeviceGetPowerUsage"].side_effect = lambda g: g.power_mw

        def energy(g):
            if g.energy_mj is None:
                raise err(pynvml.NVML_ERROR_NOT_SUPPORTED)
            return g.energy_mj
        m["nvmlDeviceGetTotalEnergyConsumption"].side_effect = energy
        yield m


class Clock:
    def __init__(self):
        self.t_s = 0.0

    def __call__(self):
        return self.t_s


# --- error mapping -------------------------------------------------------------------------

@pytest.mark.parametrize(("code", "cls", "words"), [
    (pynvml.NVML_ERROR_NO_PERMISSION, PowerPermissionError, ["root", "CAP_SYS_ADMIN"]),
    (pynvml.NVML_ERROR_NOT_SUPPORTED, PowerNotSupported, ["NOT_SUPPORTED"]),
    (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, PowerLibraryNotFound, ["driver", "power.backend auto"]),
    (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, PowerLibraryNotFound, ["power.backend auto"]),
    (pynvml.NVML_ERROR_GPU_IS_LOST, PowerError, ["NVML error 15"]),
    (pynvml.NVML_ERROR_UNKNOWN, PowerError, ["NVML error"]),
])
def test_map_nvml_error(code, cls, words):
    e = map_nvml_error(err(code), device="gpu3", action="set power limit")
    assert type(e) is cls and isinstance(e, tb_errors.TestbedError)
    for w in ["gpu3", "set power limit", *words]:
        assert w in str(e)


def test_driver_error_is_raised_from_nvml_error(nv):
    nv["nvmlDeviceSetPowerManagementLimit"].side_effect = err(pynvml.NVML_ERROR_NO_PERMISSION)
    dev = NvmlDevice(0)
    with pytest.raises(PowerPermissionError, match="root") as info:
        dev.set_limit_w(200)
    assert isinstance(info.value.__cause__, pynvml.NVMLError_NoPermission)


# --- units, idempotence, range, enforcement ------------------------------------------------

def test_limits_converted_from_mw(nv):
    lim = NvmlDevice(0).limits_w()
    assert (lim.min_w, lim.max_w, lim.default_w) == (100.0, 400.0, 350.0)


def test_readings_converted_to_w(nv, gpus):
    gpus[0].power_mw, gpus[0].limit_mw = 123_456, 222_500
    dev = NvmlDevice(0)
    assert dev.power_w() == pytest.approx(123.456)
    assert dev.enforced_limit_w() == pytest.approx(222.5)


def test_set_limit_w_sends_mw(nv, gpus):
    NvmlDevice(0).set_limit_w(212.5)
    nv["nvmlDeviceSetPowerManagementLimit"].assert_called_once_with(gpus[0], 212_500)


def test_set_limit_w_is_idempotent(nv):
    dev = NvmlDevice(0)
    dev.set_limit_w(200)
    dev.set_limit_w(200)
    assert nv["nvmlDeviceSetPowerManagementLimit"].call_count == 1


def test_set_to_current_limit_does_not_call_driver(nv):
    NvmlDevice(0).set_limit_w(300)  # gpu0 starts at 300 W
    nv["nvmlDeviceSetPowerManagementLimit"].assert_not_called()


@pytest.mark.parametrize("watts", [99.9, 400.1, float("nan")])
def test_out_of_range_refused_before_driver(nv, watts):
    with pytest.raises(PowerLimitOutOfRange, match=r"min_w=100 W, max_w=400 W") as info:
        NvmlDevice(0).set_limit_w(watts)
    assert info.value.min_w == 100 and info.value.max_w == 400
    nv["nvmlDeviceSetPowerManagementLimit"].assert_not_called()


def test_cap_not_enforced(nv, gpus):
    gpus[0].enforce = False
    with pytest.raises(CapNotEnforced, match=r"200 W.*300 W") as info:
        NvmlDevice(0).set_limit_w(200)
    assert (info.value.requested_w, info.value.enforced_w) == (200, 300)


def test_cap_within_tolerance_accepted(nv, gpus):
    NvmlDevice(0, tolerance_w=1.0).set_limit_w(300.5)  # driver already at 300 W: 0.5 W off


# --- node: sums and split -------------------------------------------------------------------

def test_node_sums_and_splits(nv, gpus):
    node = NvmlNode()
    assert [d.name for d in node.devices] == ["gpu0", "gpu1"]
    assert node.limits_w().max_w == 800
    assert node.enforced_limit_w() == 550
    node.set_limit_w(400)
    assert [g.limit_mw for g in gpus] == [200_000, 200_000]
    assert node.power_w() == 300


def test_node_refuses_share_out_of_range_before_any_set(nv):
    with pytest.raises(PowerLimitOutOfRange):
        NvmlNode().set_limit_w(900)
    nv["nvmlDeviceSetPowerManagementLimit"].assert_not_called()


# --- restore on exit -------------------------------------------------------------------------

def test_restore_on_normal_exit(nv, gpus):
    with NvmlNode() as node:
        node.set_limit_w(300)
        assert [g.limit_mw for g in gpus] == [150_000, 150_000]
    assert [g.limit_mw for g in gpus] == [300_000, 250_000]
    assert nv["nvmlShutdown"].call_count == nv["nvmlInit"].call_count


@pytest.mark.parametrize("exc", [RuntimeError("boom"), KeyboardInterrupt(), SystemExit(143)])
def test_restore_on_exception_and_interrupt(nv, gpus, exc):
    with pytest.raises(type(exc)):
        with NvmlNode() as node:
            node.devices[0].set_limit_w(120)
            node.devices[1].set_limit_w(380)
            raise exc
    assert [g.limit_mw for g in gpus] == [300_000, 250_000]


def test_atexit_registered_and_restore_once(nv, gpus):
    with mock.patch.object(nvml_backend.atexit, "register", autospec=True) as reg, \
         mock.patch.object(nvml_backend.atexit, "unregister", autospec=True) as unreg:
        with NvmlNode() as node:
            reg.assert_called_once_with(node.restore_limits)
            node.set_limit_w(300)
        unreg.assert_called_once_with(node.restore_limits)
    calls = nv["nvmlDeviceSetPowerManagementLimit"].call_count
    node.restore_limits()  # the atexit path after __exit__ is a no-op
    assert nv["nvmlDeviceSetPowerManagementLimit"].call_count == calls


def test_restore_failure_reported_after_trying_all(nv, gpus):
    with pytest.raises(PowerError, match="not restored: gpu0"):
        with NvmlNode() as node:
            node.set_limit_w(300)
            nv["nvmlDeviceSetPowerManagementLimit"].side_effect = [
                err(pynvml.NVML_ERROR_NO_PERMISSION), None]
    assert nv["nvmlDeviceSetPowerManagementLimit"].call_count == 4  # both devices retried


# --- energy ----------------------------------------------------------------------------------

def test_energy_from_total_energy_counter(nv, gpus):
    clock = Clock()
    dev = NvmlDevice(0, clock=clock)
    assert dev.energy_j() == 5_000
    dev.begin_window("step")
    clock.t_s, gpus[0].energy_mj = 2.0, 5_600_000
    m = dev.end_window("step")
    assert (m.t_s, m.energy_j, m.mean_power_w) == (2.0, 600.0, 300.0)


def test_energy_integrated_when_counter_not_supported(nv, gpus):
    gpus[0].energy_mj = None
    clock = Clock()
    dev = NvmlDevice(0, clock=clock)
    assert dev.energy_j() == 0.0  # first sample: 150 W
    clock.t_s, gpus[0].power_mw = 2.0, 250_000
    assert dev.energy_j() == pytest.approx(400.0)  # trapezoid: 2 s * (150 + 250) / 2
    clock.t_s = 3.0
    assert dev.power_w() == 250  # power readings are samples too
    assert dev.energy_j() == pytest.approx(650.0)
    assert nv["nvmlDeviceGetTotalEnergyConsumption"].call_count == 1  # probed once


def test_energy_other_errors_propagate(nv):
    nv["nvmlDeviceGetTotalEnergyConsumption"].side_effect = err(pynvml.NVML_ERROR_GPU_IS_LOST)
    with pytest.raises(PowerError, match="read total energy"):
        NvmlDevice(0).energy_j()


def test_node_measure_window(nv, gpus):
    clock = Clock()
    node = NvmlNode(clock=clock)
    with node.measure("step") as w:
        assert w.measurement is None
        clock.t_s = 4.0
        for g in gpus:
            g.energy_mj += 800_000
    assert (w.measurement.t_s, w.measurement.energy_j, w.measurement.mean_power_w) == (4.0, 1600.0, 400.0)


def test_window_misuse(nv):
    dev = NvmlDevice(0)
    with pytest.raises(PowerError, match="never begun"):
        dev.end_window("x")
    dev.begin_window("x")
    with pytest.raises(PowerError, match="already open"):
        dev.begin_window("x")


# --- availability ----------------------------------------------------------------------------

def test_nvml_available_here_says_why():
    ok, reason = nvml_available()
    assert isinstance(ok, bool) and reason
    if not ok:  # this host (no NVIDIA driver): an explicit reason, never a pretend GPU
        assert "power.backend auto" in reason or "no GPU" in reason


def test_nvml_available_without_library(nv):
    nv["nvmlInit"].side_effect = err(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    ok, reason = nvml_available()
    assert not ok and "driver not found" in reason and "power.backend auto" in reason


def test_nvml_available_no_gpus_and_some_gpus(nv, gpus):
    assert nvml_available() == (True, "NVML found 2 GPU(s)")
    gpus.clear()
    ok, reason = nvml_available()
    assert not ok and "no GPU" in reason


def test_device_init_failure_maps_error(nv):
    nv["nvmlInit"].side_effect = err(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    with pytest.raises(PowerLibraryNotFound, match="power.backend auto"):
        NvmlDevice(0)


# --- power.backend: nvml in a run (one GPU per site) ------------------------------------------
def _caps(**site_caps):
    from testbed.power.caps import JobCap

    return {f"job-{s}": JobCap(s, w, 0.8, w) for s, w in site_caps.items()}


def test_site_caps_set_each_sites_gpu_and_restore_on_exit(nv, gpus):
    from testbed.power.site_caps import NvmlSiteCaps

    with NvmlSiteCaps(["a", "b"], node_factory=NvmlNode) as caps:
        out = caps.apply(0.0, _caps(a=200.0, b=350.0))
        assert (gpus[0].limit_mw, gpus[1].limit_mw) == (200_000, 350_000)
        assert out["job-a"].enforced_cap_w == 200.0 and out["job-a"].backend == "nvml"
        assert out["job-a"].measured_power_w == 150.0 and out["job-a"].detail == ""
        clamped = caps.apply(1.0, _caps(a=50.0))  # below this GPU's 100 W floor
        assert gpus[0].limit_mw == 100_000 and "clamped" in clamped["job-a"].detail
    assert (gpus[0].limit_mw, gpus[1].limit_mw) == (300_000, 250_000)


def test_site_caps_report_a_cap_the_driver_did_not_enforce(nv, gpus):
    from testbed.power.site_caps import NvmlSiteCaps

    gpus[1].enforce = False
    with NvmlSiteCaps(["a", "b"], node_factory=NvmlNode) as caps:
        out = caps.apply(0.0, _caps(b=200.0))
    assert out["job-b"].enforced_cap_w == 250.0 and "enforced limit is 250 W" in out["job-b"].detail


def test_site_caps_need_one_gpu_per_site(nv, gpus):
    from testbed.power.site_caps import NvmlSiteCaps

    with pytest.raises(PowerError, match="one GPU per site \\(3 sites, 2 GPU"):
        with NvmlSiteCaps(["a", "b", "c"], node_factory=NvmlNode):
            pass
    assert (gpus[0].limit_mw, gpus[1].limit_mw) == (300_000, 250_000)


def test_nvml_backend_is_refused_where_no_real_training_runs():
    from testbed.errors import SpecError
    from testbed.runner import run_scenario
    from testbed.spec import scenario_from_dict
    from testbed.spec.load import LoadedScenario
    from tests.conftest import small_scenario_dict

    sc = scenario_from_dict({**small_scenario_dict(), "power": {"backend": "nvml"}})
    loaded = LoadedScenario(scenario=sc, path=None, text="", sha256="", topology_path=None)
    with pytest.raises(SpecError, match="power.backend"):
        run_scenario(loaded, substrate="sim", progress=False)
