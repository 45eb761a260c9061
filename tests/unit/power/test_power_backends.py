"""One power path: the registry of power backends, the factory that picks a run's cap enforcer,
the built-in enforcers, and a throwaway backend added in one file and run through ``testbed run``."""

from __future__ import annotations

import importlib
import json
import math

import pandas as pd
import pytest
import yaml

from testbed.errors import SpecError
from testbed.power import PowerLimitOutOfRange
from testbed.power.throttle.agent_throttle import AgentThrottleCaps
from testbed.power.caps import CapEnforcer, CapTarget, JobCap, Throttled
from testbed.power.factory import backend_for, make_enforcer
from testbed.power.model_caps import ModelCaps
from testbed.power.gpu.profile import PowerProfile, ProfilePoint
from testbed.power.site_caps import NvmlSiteCaps
from testbed.spec import scenario_from_dict
from testbed.power import backends as power_backends
from tests.conftest import small_scenario_dict

PROFILE = PowerProfile("toy", 100.0, 300.0, 300.0, 20.0,
                       (ProfilePoint(100, 0.5, 100), ProfilePoint(200, 0.8, 180), ProfilePoint(300, 1.0, 250)),
                       source="test")


def _sc(**power):
    return scenario_from_dict({**small_scenario_dict(), "power": power})


# --- the registry and the factory ------------------------------------------------------------
def test_the_spec_choices_are_the_registry():
    assert set(power_backends.names()) >= {"auto", "model", "emulated-throttle", "nvml"}
    from testbed.spec.scenario import Scenario

    enum = Scenario.model_json_schema()["$defs"]["Power"]["properties"]["backend"]["enum"]
    assert enum == list(power_backends.names())
    with pytest.raises(SpecError, match=r"power\.backend.*unknown power backend 'gpu9000'.*known: auto, "):
        _sc(backend="gpu9000")


def test_the_builtin_backends_are_known_wherever_a_scenario_is_checked():
    """Not only where the CLI runs: a fresh interpreter that imports only the spec knows them."""
    import subprocess
    import sys

    code = ("from testbed.spec import scenario_from_dict; from tests.conftest import small_scenario_dict; "
            "print(scenario_from_dict({**small_scenario_dict(), 'power': {'backend': 'nvml'}}).power.backend)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "nvml", r.stderr[-2000:]


@pytest.mark.parametrize("asked, nodes, chosen", [
    ("auto", "analytic", "model"), ("auto", "ballast", "model"), ("auto", "agents", "emulated-throttle"),
    ("model", "agents", "model"), ("nvml", "agents", "nvml"), ("emulated-throttle", "agents", "emulated-throttle"),
])
def test_auto_picks_what_the_nodes_allow_and_other_names_are_taken_as_is(asked, nodes, chosen):
    assert backend_for(_sc(backend=asked), nodes).name == chosen


@pytest.mark.parametrize("asked, nodes, why", [
    ("nvml", "analytic", "nvml caps real GPUs"), ("nvml", "ballast", "emulation.nodes: agents"),
    ("emulated-throttle", "ballast", "runs only on agents"),
])
def test_a_backend_is_refused_up_front_where_it_cannot_cap(asked, nodes, why):
    with pytest.raises(SpecError, match=why) as e:
        backend_for(_sc(backend=asked), nodes)
    assert e.value.problems[0][0] == "power.backend"


def test_the_factory_builds_one_enforcer_named_as_the_backend():
    sc = _sc()
    enforcer = make_enforcer(sc, CapTarget("analytic"))
    assert isinstance(enforcer, ModelCaps) and enforcer.name == "model"
    assert isinstance(make_enforcer(_sc(backend="nvml"), CapTarget("agents")), NvmlSiteCaps)
    port = FakePort()
    throttle = make_enforcer(sc, CapTarget("agents", port))
    assert isinstance(throttle, AgentThrottleCaps) and throttle.name == "emulated-throttle"


def test_a_duplicate_name_is_refused():
    with pytest.raises(ValueError, match="registered twice"):
        power_backends.register(power_backends.PowerBackend("model", lambda s: None, frozenset({"analytic"}), "x"))
    for name in ("auto", "emulated"):
        with pytest.raises(ValueError, match="default choice"):
            power_backends.register(power_backends.PowerBackend(name, lambda s: None, frozenset({"analytic"}), "x"))


def test_the_earlier_name_of_the_default_is_read_with_a_warning():
    from testbed.errors import TestbedWarning

    with pytest.warns(TestbedWarning, match="power.backend: 'emulated' is now called 'auto'"):
        sc = _sc(backend="emulated")
    assert sc.power.backend == "auto" and power_backends.resolve("emulated", "agents").name == "emulated-throttle"


# --- the model: a modelled GPU per site (testbed.power.gpu.modelled_gpu) --------------------------------
def test_model_enforces_the_request_on_a_modelled_gpu():
    caps = ModelCaps({"a": PROFILE, "b": PROFILE})
    out = caps.apply(0.0, {"j1": JobCap("a", 150.0, 0.65, 140.0), "j2": JobCap("b", 300.0, 1.0, 250.0)})
    assert out["j1"].enforced_cap_w == 150.0 and out["j1"].throughput_frac == pytest.approx(0.65)
    assert out["j1"].backend == "model" and out["j1"].measured_power_w is None
    assert caps.devices["a"].enforced_limit_w() == 150.0 and caps.devices["a"].power_w() == pytest.approx(140)
    caps.apply(10.0, {"j1": JobCap("a", 150.0, 0.65, 140.0)})
    assert caps.devices["a"].energy_j() == pytest.approx(1400)  # 10 scenario seconds at 140 W
    with pytest.raises(PowerLimitOutOfRange):
        caps.apply(20.0, {"j1": JobCap("a", 99.0, 0.5, 99.0)})  # the controller clamps; a bug would show here


# --- the agent throttle, through the substrate's port -------------------------------------------
class FakePort:
    def __init__(self):
        self.calls: list[tuple[str, str, float, float]] = []
        self.where: dict[str, str] = {}

    def job_site(self, job_id: str, site: str) -> str:
        return self.where.get(job_id, site)

    def set_throughput(self, job_id: str, site: str, frac: float, cap_w: float) -> Throttled:
        self.calls.append((job_id, site, frac, cap_w))
        return Throttled(frac, "duty-cycle", "no cgroup here")


def test_agent_throttle_sends_a_changed_cap_once_and_reports_the_agents_throttle():
    port = FakePort()
    caps = AgentThrottleCaps(port)
    out = caps.apply(0.0, {"j1": JobCap("a", 200.0, 0.8, 180.0)})
    assert out["j1"].backend == "emulated-throttle" and out["j1"].throttle == "duty-cycle"
    assert out["j1"].throughput_frac == 0.8 and out["j1"].detail == "no cgroup here"
    caps.apply(300.0, {"j1": JobCap("a", 200.0, 0.8, 180.0)})
    assert port.calls == [("j1", "a", 0.8, 200.0)]  # unchanged: not sent again
    port.where["j1"] = "b"  # the job moved: its new agent gets the cap
    caps.apply(600.0, {"j1": JobCap("a", 200.0, 0.8, 180.0)})
    caps.apply(900.0, {"j1": JobCap("b", 300.0, 1.0, 250.0)})
    assert port.calls[1:] == [("j1", "b", 0.8, 200.0), ("j1", "b", 1.0, 300.0)]


def test_agent_throttle_needs_a_port():
    with pytest.raises(Exception, match="no training agents"):
        make_enforcer(_sc(backend="emulated-throttle"), CapTarget("agents"))


# --- a throwaway backend in one file, through `testbed run` on sim -------------------------------
def _run(tmp_path, name, backend):
    from testbed.cli import main

    d = small_scenario_dict(policies=["static"])
    d["power"] = {"backend": backend}
    f = tmp_path / f"{name}.yaml"
    f.write_text(yaml.safe_dump(d))
    out = tmp_path / name
    assert main(["run", str(f), "--substrate", "sim", "--out", str(out), "--no-progress"]) == 0
    return out


def test_a_throwaway_backend_in_one_file_runs_through_testbed_run(tmp_path, capsys):
    fixture = importlib.import_module("tests.fixtures.throwaway_power")
    assert issubclass(fixture.HalfCaps, CapEnforcer) and fixture.NAME in power_backends.names()
    half = _run(tmp_path, "half", fixture.NAME)
    model = _run(tmp_path, "model", "auto")
    p = pd.read_parquet(half / "static" / "power.parquet")
    assert len(p) > 0 and (p["backend"] == fixture.NAME).all()
    assert (p["cap_enforced_w"] == fixture.FRACTION * p["cap_w"]).all() and p["detail"].str.startswith("halved").all()
    assert json.loads((half / "manifest.json").read_text())["substrate"]["power_backend"] == fixture.NAME
    assert (pd.read_parquet(model / "static" / "power.parquet")["backend"] == "model").all()
    # the enforced caps, not the requested ones, drove the run: half the cap, slower jobs
    jh = pd.read_parquet(half / "static" / "jobs.parquet").set_index("job_id")
    jm = pd.read_parquet(model / "static" / "jobs.parquet").set_index("job_id")
    done = [j for j in jm.index if not math.isnan(jm.loc[j, "finished_s"])]
    assert done and all(jh.loc[j, "finished_s"] > jm.loc[j, "finished_s"] or math.isnan(jh.loc[j, "finished_s"])
                        for j in done)
    # and it is refused, up front, where it says it cannot run
    from testbed.cli import main

    capsys.readouterr()
    assert main(["run", str(tmp_path / "half.yaml"), "--substrate", "netns", "--out", str(tmp_path / "x"),
                 "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "power.backend" in err and "test backend for the analytic substrate" in err
    assert not (tmp_path / "x").exists()


def test_without_the_import_the_throwaway_name_is_refused_with_the_known_ones(tmp_path):
    import subprocess
    import sys

    d = small_scenario_dict(policies=["static"])
    d["power"] = {"backend": "throwaway-half"}
    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump(d))
    r = subprocess.run([sys.executable, "-m", "testbed", "validate", str(f)], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "power.backend" in r.stderr and "unknown power backend 'throwaway-half'" in r.stderr
    assert "known: auto, model, emulated-throttle, nvml" in r.stderr
