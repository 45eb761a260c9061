"""Substrates and node runtimes are each one registry entry, read by every part that once kept a list
of them: the sweep file's and the API's substrate check, ``testbed doctor``, ``--substrate auto``, the
federated study, the scenario's ``emulation.runtime``, the preflight and the agent pool. A toy
substrate registered from this module and a toy runtime from a plug-in file are accepted and listed
like the built-ins, and refused by name once taken out again."""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from testbed.doctor.capability import Capability
from testbed.doctor.report import render, summarize
from testbed.node_kinds import NODE_RUNTIMES, register_node_runtime
from testbed.substrate import SUBSTRATES, SubstrateKind, register_substrate
from testbed.substrate.registry import choose_substrate, doctor_checks, substrate_unavailable
from tests.conftest import small_scenario_dict

REPO = Path(__file__).resolve().parents[3]


def _toy_make(inputs, run_id):
    from testbed.substrate.sim.substrate import SimSubstrate

    return SimSubstrate(inputs)


def _toy_doctor(caps):
    return ["netns"], "a toy substrate"


TOY = SubstrateKind("toy", "the analytic substrate under another name (a test)", make=_toy_make, doctor=_toy_doctor,
                    federated="testbed.federated.exchange:modelled_exchange")


@pytest.fixture
def toy_substrate():
    register_substrate(TOY)
    yield TOY
    SUBSTRATES.discard(TOY.name)


@pytest.fixture
def toy_runtime():
    mod = importlib.import_module("tests.fixtures.throwaway_runtime")
    register_node_runtime(mod.RUNTIME)  # again where an earlier test took it out; else a no-op
    yield mod
    NODE_RUNTIMES.discard(mod.NAME)


def _caps(**available: bool) -> dict[str, Capability]:
    return {name: Capability(name, ok, "", "", {"probed": True}) for name, ok in available.items()}


def _scenario(**emulation):
    from testbed.spec.load import scenario_from_dict

    d = small_scenario_dict(policies=["static"])
    d["emulation"] = emulation
    return scenario_from_dict(d)


# -- substrates ------------------------------------------------------------------------------------

def test_doctor_lists_the_registered_substrates_then_the_runtimes():
    assert list(doctor_checks())[:4] == ["sim", "netns", "mininet", "docker"]
    assert "local" not in doctor_checks()  # its entry has no doctor line, as before


def test_a_substrate_from_a_test_module_is_accepted_and_listed_by_doctor(toy_substrate):
    from testbed.api import check_substrate
    from testbed.cli.choices import SubstrateChoices
    from testbed.federated.exchange import unsupported
    from testbed.sweep.spec import SweepSpec

    assert SweepSpec.model_validate({"scenario": "x.yaml", "substrate": "toy"}).substrate == "toy"
    assert "toy" in SweepSpec.model_json_schema()["properties"]["substrate"]["enum"]
    assert check_substrate("toy") == "toy" and "toy" in SubstrateChoices()
    assert unsupported("toy") is None  # its entry names the federated study's exchange
    caps = _caps(root=True, netns=True, veth=True, qdisc_tbf=True)
    summary = summarize(caps, "", doctor_checks())
    assert summary["substrates"]["toy"] == {"usable": True, "why": "a toy substrate"}
    assert "  toy      yes  a toy substrate" in render(caps, summary).splitlines()

    SUBSTRATES.discard("toy")  # unregistered: refused by name, no longer listed
    with pytest.raises(ValueError, match=r"unknown substrate 'toy' \(known: auto, sim, netns"):
        SweepSpec.model_validate({"scenario": "x.yaml", "substrate": "toy"})
    assert "toy" not in summarize(caps, "", doctor_checks())["substrates"]


def test_an_unknown_substrate_names_the_field_and_the_choices():
    from testbed.api import check_substrate
    from testbed.errors import SpecError
    from testbed.sweep.spec import SweepSpec

    with pytest.raises(ValueError, match=r"unknown substrate 'netn' \(did you mean netns\?\) \(known: auto, sim, netns"):
        SweepSpec.model_validate({"scenario": "x.yaml", "substrate": "netn"})
    with pytest.raises(SpecError) as e:
        check_substrate("netn", flag="--substrate")
    assert e.value.lines()[0].startswith("--substrate: unknown substrate 'netn' (did you mean netns?) (known: auto, sim")


def test_auto_chooses_the_highest_ranked_substrate_not_refused(monkeypatch):
    sc = _scenario()
    assert choose_substrate("netns", sc) == ("netns", "as requested")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert choose_substrate("auto", sc) == ("sim", "not root: network namespaces need root, so the analytic "
                                                   "substrate ran")
    ranked = SubstrateKind("toy-auto", "a test", make=_toy_make, auto_rank=20, auto_reason="the toy could")
    monkeypatch.setitem(SUBSTRATES._entries, ranked.name, ranked)
    assert choose_substrate("auto", sc) == ("toy-auto", "the toy could")
    refused = SubstrateKind("toy-auto", "a test", make=_toy_make, auto_rank=20, auto_refusal=lambda s: "no toy here")
    monkeypatch.setitem(SUBSTRATES._entries, refused.name, refused)
    assert choose_substrate("auto", sc) == ("sim", "no toy here")  # the first refusal is the reason


def test_the_federated_study_runs_where_an_entry_names_its_exchange():
    from testbed.federated.exchange import unsupported

    assert unsupported("sim") is None and unsupported("netns") is None
    assert unsupported("mininet") == "the federated study runs on sim or netns, not 'mininet'"


def test_a_live_substrate_refuses_a_runtime_it_does_not_start():
    sc = SimpleNamespace(emulation=SimpleNamespace(runtime="docker", nodes="agents"), sites=[object()], links=[])
    assert substrate_unavailable("local", sc) == ("the local substrate starts node agents with runtime process only "
                                                   "(emulation.runtime is 'docker')")


# -- node runtimes ---------------------------------------------------------------------------------

def test_a_runtime_from_a_plug_in_is_accepted_and_listed_by_doctor(toy_runtime):
    from testbed.errors import SpecError
    from testbed.spec.scenario import Scenario

    name = toy_runtime.NAME
    assert _scenario(nodes="agents", runtime=name).emulation.runtime == name
    assert name in Scenario.model_json_schema()["$defs"]["Emulation"]["properties"]["runtime"]["enum"]
    with pytest.raises(SpecError, match=f"runtime '{name}' does not apply to nodes 'ballast'"):
        _scenario(nodes="ballast", runtime=name)  # it starts agents: ballast runs none
    caps = _caps(root=False)
    summary = summarize(caps, "", doctor_checks())
    assert summary["substrates"][name] == {"usable": False, "why": "missing root"}

    NODE_RUNTIMES.discard(name)
    with pytest.raises(SpecError, match=rf"emulation.runtime: unknown node runtime '{name}' \(known: process, docker\)"):
        _scenario(nodes="agents", runtime=name)
    assert name not in summarize(caps, "", doctor_checks())["substrates"]


def test_an_unknown_runtime_gets_a_suggestion():
    from testbed.errors import SpecError

    with pytest.raises(SpecError, match=r"emulation.runtime: unknown node runtime 'dockr' \(did you mean docker\?\) "
                                        r"\(known: process, docker"):
        _scenario(nodes="agents", runtime="dockr")


def test_images_name_the_runtimes_that_take_them(tmp_path):
    from testbed.errors import SpecError

    with pytest.raises(SpecError, match="an image is for containers: set emulation.runtime: docker"):
        _scenario(nodes="agents", runtime="process", image={"tar": str(tmp_path / "x.tar")})


def test_the_agent_pool_starts_agents_with_the_runtimes_launcher(toy_runtime):
    from testbed.substrate.emulated.agents import AgentPool, ProcessLauncher

    fabric = SimpleNamespace(plan=SimpleNamespace(run_id="abc123", sites=()))
    pool = AgentPool(fabric, "token", runtime=toy_runtime.NAME)
    assert isinstance(pool._launcher, ProcessLauncher) and pool.runtime_info == {"launched_by": toy_runtime.NAME}
    assert type(AgentPool(fabric, "token")._launcher) is ProcessLauncher
    with pytest.raises(ValueError, match="unknown runtime 'nope'"):
        AgentPool(fabric, "token", runtime="nope")


def test_a_scenario_names_the_runtime_its_plugins_register(tmp_path):
    shutil.copy(REPO / "tests" / "fixtures" / "throwaway_runtime.py", tmp_path / "lab_runtime.py")
    d = small_scenario_dict(policies=["static"])
    d["emulation"] = {"nodes": "agents", "runtime": "throwaway-process"}
    without = tmp_path / "without.yaml"
    without.write_text(yaml.safe_dump(d, sort_keys=False), encoding="utf-8")
    with_plugin = tmp_path / "with.yaml"
    with_plugin.write_text(yaml.safe_dump({**d, "plugins": ["lab_runtime.py"]}, sort_keys=False), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def validate(path):
        return subprocess.run([sys.executable, "-m", "testbed", "validate", str(path)], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300)

    ok = validate(with_plugin)
    assert ok.returncode == 0, ok.stderr[-2000:]
    refused = validate(without)
    assert refused.returncode == 2 and "emulation.runtime: unknown node runtime 'throwaway-process'" in refused.stderr
