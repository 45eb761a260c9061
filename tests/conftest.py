"""Shared fixtures: small scenarios built in memory, and the repository root."""

from __future__ import annotations

import copy
import os
import signal
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def small_scenario_dict(**overrides) -> dict:
    """Two sites, one 10 Gbit/s link, constant bandwidth, explicit jobs: easy to reason about."""
    base = {
        "name": "small",
        "seed": 1,
        "duration_h": 24,
        "step_s": 300,
        "sites": [
            {"name": "a", "lat_deg": 45.0, "lon_deg": 9.0, "nodes": 2},
            {"name": "b", "lat_deg": 48.0, "lon_deg": 11.0, "nodes": 2},
        ],
        "links": [{"a": "a", "b": "b", "bandwidth_gbps": 10, "latency_ms": 5}],
        "traces": {
            "renewable": {"default": {"kind": "curtailment_windows", "capacity_kw": 2.0, "windows_per_day": 2}},
        },
        "workloads": {"jobs": [
            {"id": "j1", "checkpoint_gb": 40, "work_gpu_h": 6, "arrival_h": 0, "origin": "a"},
            {"id": "j2", "checkpoint_gb": 24, "work_gpu_h": 4, "arrival_h": 1, "origin": "b"},
        ]},
        "policies": ["static", "energy_only", "feasibility_aware", "no_filter"],
    }
    out = copy.deepcopy(base)
    out.update(overrides)
    return out


def run_policies(sc, seed=None):
    """Run every policy of a validated scenario on the sim substrate; tables per policy label."""
    from testbed.controller.controller import Controller
    from testbed.inputs import build_inputs
    from testbed.policies import make_policy
    from testbed.substrate.sim import SimSubstrate

    inputs = build_inputs(sc, seed)
    out = {}
    for spec in sc.policies:
        with SimSubstrate(inputs) as sub:
            rec = Controller(inputs, make_policy(spec, inputs.scenario), sub).run()
        out[spec.label or spec.name] = rec.tables()
    return out


SERIAL_SCOPE = "serial"
"""Under pytest-xdist (``scripts/test.sh`` runs ``-n 2``) the tests of this scope run one after
another on one worker: every integration test (root, namespaces, engines, timed transfers) and the
unit tests that look at machine-wide state (Ray's processes). Every other scope is a unit test
module (its module-scoped fixtures, e.g. the validation corpus, are built once, on one worker)."""
_MACHINE_WIDE_UNIT_FILES = {"test_sweep_ray.py", "test_sweep_ray_cluster.py", "test_sweep_ray_emulation.py"}
UNIT_NICE = 10


def _serial_path(path: str) -> bool:
    parts = Path(path).parts
    return "integration" in parts or (bool(parts) and parts[-1] in _MACHINE_WIDE_UNIT_FILES)


def _serial(item: pytest.Item) -> bool:
    return _serial_path(str(item.fspath))


def xdist_scope(nodeid: str) -> str:
    """The xdist scope of a test id (``tests/unit/test_x.py::test_y[z]``)."""
    module = nodeid.split("::", 1)[0]
    return SERIAL_SCOPE if _serial_path(module) else module


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """xdist's scope scheduler with :func:`xdist_scope` as the scope: scopes go to workers as whole
    units, the largest (the serial one) first. (Its ``loadgroup`` mode cannot be used: with pytest 9
    its marker no longer reaches the node ids it schedules by.)"""
    from xdist.scheduler import LoadScopeScheduling

    class SerialScopeScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_scope(nodeid)

    return SerialScopeScheduling(config, log)


QUIET_MODULES = {  # integration tests that time transfers, rates or CPU shares: the other worker waits
    "test_agents.py", "test_fabric.py", "test_fastrelay.py", "test_measured_io.py", "test_net_live.py",
    "test_netem.py", "test_power_throttle.py", "test_relay.py", "test_relayfork.py", "test_transfer_netns.py",
    "test_user_workload_throttle.py", "test_vm_guest.py",
    "test_time_and_capacity_guidance.py",  # the estimate against the wall time of a run
    "test_cross_traffic_netns.py",  # a flow's share of a link beside generated cross-traffic
}


def _lock_files(run: str) -> tuple[Path, Path]:
    """The turnstile and the lock of one xdist run (all its workers share the run id)."""
    import tempfile

    base = Path(tempfile.gettempdir()) / f"testbed-pytest-{run}"
    return base.with_name(base.name + ".gate"), base.with_name(base.name + ".lock")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Under xdist, a test of :data:`QUIET_MODULES` runs alone on the machine: it takes an exclusive
    lock that every other test holds shared while it runs. A turnstile lock in front keeps new tests
    from starving the waiting quiet one (flock lets shared holders in past a waiting exclusive one)."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if not run:
        yield
        return
    import fcntl

    quiet = Path(str(item.fspath)).name in QUIET_MODULES
    gate_path, lock_path = _lock_files(run)
    with open(gate_path, "a") as gate, open(lock_path, "a") as lock:
        fcntl.flock(gate, fcntl.LOCK_EX)
        if not quiet:
            fcntl.flock(gate, fcntl.LOCK_UN)
        fcntl.flock(lock, fcntl.LOCK_EX if quiet else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
            fcntl.flock(gate, fcntl.LOCK_UN)


def pytest_sessionfinish(session):
    """Workers end together (after the last test of all), so the lock files go with them."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if run:
        for path in _lock_files(run):
            path.unlink(missing_ok=True)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Beside the serial group, unit tests run at a lower CPU priority (as root, the only user who can
    raise it back), so the timed transfers and power loops of the integration tests keep their core."""
    if os.geteuid() != 0 or not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    os.setpriority(os.PRIO_PROCESS, 0, 0 if _serial(item) else UNIT_NICE)


@pytest.fixture
def root() -> Path:
    return ROOT


PACE_CACHE_ENV = "TESTBED_PACE_CACHE"


@pytest.fixture(autouse=True)
def _no_machine_dataplane_capacity(tmp_path_factory, monkeypatch):
    """Tests never read the relay capacity `testbed bench shaping` cached for this machine: the
    defaults apply unless a test writes its own cache (testbed.netem.dataplane_capacity)."""
    from testbed.netem.dataplane_capacity import CACHE_ENV

    monkeypatch.setenv(CACHE_ENV, str(tmp_path_factory.getbasetemp() / "no-dataplane-capacity.json"))
    # nor write or read the machine's measured emulation pace (testbed.studies.pace.CACHE_ENV; named
    # here, not imported: the studies package needs numpy, which the qemu guest's tests do without)
    monkeypatch.setenv(PACE_CACHE_ENV, str(tmp_path_factory.getbasetemp() / "emulation-pace.json"))


@pytest.fixture
def sigint_raises():
    """SIGINT raises KeyboardInterrupt in this test, as in an interactive shell, also where the suite
    was started with SIGINT ignored (``nohup``, ``cmd &``), whose disposition the test would inherit."""
    previous = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)
