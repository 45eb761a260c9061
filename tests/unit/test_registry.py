"""Registries: a policy, a selection policy, a trace kind, a grid signal and a substrate each join the
testbed from one file (tests/fixtures/throwaway_*.py), and are refused with a clear message when not
imported. Each kind is one registry whose entries hold the model and the builder."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Literal

import pandas as pd
import pytest
import yaml

from testbed.cli import main
from testbed.registry import DuplicateNameError, Registry, UnknownNameError
from testbed.spec.base import Strict
from testbed.spec.union import check_member
from tests.conftest import ROOT, small_scenario_dict


def _plugin(name: str):
    """Import a fixture module once (a second import would be the same module: registration is idempotent)."""
    return importlib.import_module(f"tests.fixtures.{name}")


def _write(tmp_path: Path, d: dict, name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(d, sort_keys=False), encoding="utf-8")
    return path


def _fresh_testbed(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """The CLI in a fresh interpreter: only the built-in plug-ins are registered there."""
    return subprocess.run([sys.executable, "-m", "testbed", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


# -- the registry itself ----------------------------------------------------------------------

def test_registry_names_in_order_and_unknown_names_listed():
    reg: Registry[int] = Registry("gadget")
    reg.add("b", 2)
    assert reg.register("a")(1) == 1
    assert reg.names() == ("b", "a") and "a" in reg and reg.get("b") == 2 and len(reg) == 2
    with pytest.raises(UnknownNameError) as e:
        reg.get("c")
    assert str(e.value) == "unknown gadget 'c' (known: b, a)"
    assert isinstance(e.value, LookupError)


def test_same_entry_twice_is_a_no_op_a_different_one_is_refused():
    reg: Registry[object] = Registry("gadget")
    calls = []
    reg.on_change(lambda: calls.append(1))
    thing = object()
    reg.add("x", thing)
    reg.add("x", thing)  # a module imported twice
    assert calls == [1]
    with pytest.raises(DuplicateNameError, match="gadget 'x' is registered twice"):
        reg.add("x", object())
    with pytest.raises(TypeError):
        reg.add("", thing)


def test_a_refused_entry_is_taken_out_again():
    reg: Registry[int] = Registry("gadget")
    seen = []

    def listener():
        seen.append(reg.names())
        if "bad" in reg:
            raise ValueError("no")

    reg.on_change(listener)
    reg.add("ok", 1)
    with pytest.raises(ValueError):
        reg.add("bad", 2)
    assert reg.names() == ("ok",) and seen == [("ok",), ("ok", "bad"), ("ok",)]


def test_a_policy_name_taken_by_the_other_study_is_refused_and_the_union_still_works():
    from testbed.spec.load import scenario_from_dict
    from testbed.spec.policies import MIGRATION_POLICIES, MigrationPolicyBase, migration_policy

    class Clash(MigrationPolicyBase):
        name: Literal["random"]  # a selection policy's name

    with pytest.raises(TypeError, match="random"):
        migration_policy("tests.nowhere:ClashPolicy")(Clash)
    assert "random" not in MIGRATION_POLICIES
    assert [p.name for p in scenario_from_dict(small_scenario_dict(policies=["static"])).policies] == ["static"]


def test_a_model_needs_a_literal_tag():
    class NoTag(Strict):
        kw: float

    class Loose(Strict):
        kind: str

    class Tagged(Strict):
        kind: Literal["tagged"]

    for model in (NoTag, Loose):
        with pytest.raises(TypeError, match="needs a field 'kind' typed Literal"):
            check_member(model, "kind")
    assert check_member(Tagged, "kind") == "tagged"


def test_builtins_are_registered():
    from testbed.federated.policies import SELECTION_POLICIES
    from testbed.policies import MIGRATION_POLICIES
    from testbed.spec.policies import policy_names
    from testbed.substrate import substrate_choices
    from testbed.traces import TRACE_KINDS
    from testbed.traces.grid_signals import GRID_SIGNALS

    assert {"static", "energy_only", "feasibility_aware", "no_filter"} <= set(MIGRATION_POLICIES.names())
    assert {"random", "static_k", "fixed_radius", "centralized", "powertrip"} <= set(SELECTION_POLICIES.names())
    assert set(MIGRATION_POLICIES.names()) | set(SELECTION_POLICIES.names()) <= set(policy_names())
    assert {"curtailment_windows", "solar", "caiso", "google", "google_synthetic", "csv"} <= set(TRACE_KINDS.names())
    assert {"csv", "daily", "constant"} <= set(GRID_SIGNALS.names())
    assert substrate_choices()[:4] == ("auto", "sim", "netns", "mininet")


def test_each_builtin_entry_holds_its_model_and_a_builder_that_imports():
    """One entry per thing: the model the scenario validates and the builder its name resolves to."""
    from testbed.federated.policies import SELECTION_POLICIES, SelectionPolicy
    from testbed.policies import MIGRATION_POLICIES, Policy
    from testbed.traces import TRACE_KINDS
    from testbed.traces.grid_signals import GRID_SIGNALS

    for registry, base in ((MIGRATION_POLICIES, Policy), (SELECTION_POLICIES, SelectionPolicy)):
        for name, entry in registry.items():
            assert check_member(entry.model, "name") == name
            built = entry.builder()
            assert isinstance(built, type) and issubclass(built, base), name
            assert registry.name_of(built) == name  # a class named by import path keeps its registered name
    for registry in (TRACE_KINDS, GRID_SIGNALS):
        for name, entry in registry.items():
            assert check_member(entry.model, "kind") == name and callable(entry.builder()), name


# -- without the plug-in's import: refused, naming what is known ------------------------------

def test_unimported_plugins_are_refused_by_name(tmp_path):
    d = small_scenario_dict(policies=["static", "throwaway"])
    d["traces"]["renewable"]["default"] = {"kind": "constant_kw", "kw": 2.0}
    bad = _write(tmp_path, d)
    r = _fresh_testbed("validate", str(bad), cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    lines = r.stderr.splitlines()
    assert any(line.startswith(f"error: {bad}: policies[1]: unknown policy 'throwaway' (the migration study has: static")
               for line in lines), lines
    assert any(f"{bad}: traces.renewable.default: unknown kind 'constant_kw' (expected one of 'curtailment_windows'"
               in line for line in lines), lines

    good = _write(tmp_path, small_scenario_dict(policies=["static"]), "good.yaml")
    r = _fresh_testbed("run", str(good), "--substrate", "sim_twin", "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert r.returncode == 2 and not (tmp_path / "out").exists()
    assert r.stderr.strip() == ("error: testbed run: argument --substrate: invalid choice: 'sim_twin' "
                                "(choose from auto, sim, netns, mininet, local) (see testbed run --help)")


# -- imported: one file each, run through `testbed run` on sim --------------------------------

def test_throwaway_policy_and_trace_kind_run_on_sim(tmp_path, capsys):
    policy, trace = _plugin("throwaway_policy"), _plugin("throwaway_trace")
    d = small_scenario_dict(policies=["static", {"name": policy.NAME, "label": "pinned", "site_index": -1}])
    d["traces"]["renewable"]["default"] = {"kind": trace.KIND, "kw": 1.25}
    path = _write(tmp_path, d)
    out = tmp_path / "out"
    assert main(["validate", str(path)]) == 0
    assert main(["run", str(path), "--substrate", "sim", "--out", str(out), "--no-progress"]) == 0
    capsys.readouterr()
    summary = json.loads((out / "pinned" / "summary.json").read_text())
    assert summary["policy"] == policy.NAME and summary["label"] == "pinned"
    decisions = pd.read_parquet(out / "pinned" / "decisions.parquet")
    places = decisions[decisions["kind"] == "place"]
    assert len(places) == 2 and set(places["dst"]) == {"b"}  # the last site, whatever the job's origin
    assert not (decisions["kind"] == "migrate").any()
    traces = pd.read_parquet(out / "traces.parquet")
    renewable = traces[traces["quantity"] == "renewable_power"]
    assert set(renewable["site"]) == {"a", "b"} and set(renewable["unit"]) == {"kW"} and set(renewable["value"]) == {1.25}
    manifest = json.loads((out / "manifest.json").read_text())
    assert [p["name"] for p in manifest["policies"]] == ["static", policy.NAME]


def test_plugin_fields_are_validated_with_paths(tmp_path, capsys):
    _plugin("throwaway_policy"), _plugin("throwaway_trace")
    d = small_scenario_dict(policies=[{"name": "throwaway", "site_index": "last"}])
    d["traces"]["renewable"]["default"] = {"kind": "constant_kw", "kw": -1}
    path = _write(tmp_path, d)
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert f"error: {path}: policies[0].site_index: must be an integer (got 'last')" in err, err
    assert any(line.startswith(f"error: {path}: traces.renewable.default.kw: must be > 0") for line in err), err


def test_schema_lists_registered_plugins(capsys):
    _plugin("throwaway_policy"), _plugin("throwaway_trace")
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    text = json.dumps(schema)
    for name in ("static", "feasibility_aware", "powertrip", "throwaway", "solar", "csv", "constant_kw"):
        assert f'"const": "{name}"' in text or f'"enum": ["{name}"]' in text, name


def test_throwaway_grid_signal_kind_builds_its_traces():
    sig = _plugin("throwaway_signal")
    from testbed.spec.load import scenario_from_dict
    from testbed.traces.grid_signals import build_grid_signals

    d = small_scenario_dict(policies=["static"])
    d["traces"]["carbon"] = {"sites": {"default": {"kind": sig.KIND, "value": 123.0}}}
    sc = scenario_from_dict(d)
    signals = build_grid_signals(sc, seed=1, horizon_s=sc.duration_s)
    assert {tr.at(0.0) for tr in signals.carbon_g_per_kwh.values()} == {123.0}
    assert {tr.unit for tr in signals.carbon_g_per_kwh.values()} == {"gCO2/kWh"}


def test_a_plugin_cannot_take_a_builtin_name():
    from testbed.spec.trace_sources import TRACE_KINDS

    class MySolar(Strict):
        kind: Literal["solar"]

    with pytest.raises(DuplicateNameError, match="trace kind 'solar' is registered twice"):
        TRACE_KINDS.add_kind(MySolar, lambda src, ctx: None)
    assert TRACE_KINDS.model("solar").__name__ == "Solar"


def test_throwaway_substrate_equals_sim(tmp_path, capsys):
    sub = _plugin("throwaway_substrate")
    path = _write(tmp_path, small_scenario_dict(policies=["static", "feasibility_aware"]))
    for name in ("sim", sub.NAME):
        assert main(["run", str(path), "--substrate", name, "--out", str(tmp_path / name), "--no-progress"]) == 0
    capsys.readouterr()
    for label in ("static", "feasibility_aware"):
        assert (tmp_path / "sim" / label / "summary.json").read_bytes() == \
            (tmp_path / sub.NAME / label / "summary.json").read_bytes()
    from testbed.sweep.spec import SweepSpec

    assert SweepSpec.model_validate({"scenario": "x.yaml", "substrate": sub.NAME}).substrate == sub.NAME


def test_throwaway_selection_policy_runs_federated_on_sim(tmp_path, capsys):
    sel = _plugin("throwaway_selection")
    from tests.unit.federated_support import tiny

    d = tiny(max_rounds=2)
    d["policies"] = [{"name": sel.NAME, "k": 2}, {"name": "random", "k": 2}]
    path = _write(tmp_path, d)
    out = tmp_path / "out"
    assert main(["run", str(path), "--substrate", "sim", "--out", str(out), "--no-progress"]) == 0
    capsys.readouterr()
    assert (out / sel.NAME / "summary.json").is_file() and (out / "random" / "summary.json").is_file()
    rounds = pd.read_parquet(next((out / sel.NAME).glob("rounds.parquet")))
    assert len(rounds) >= 1


def test_a_migration_policy_in_a_federated_scenario_is_refused(tmp_path, capsys):
    _plugin("throwaway_policy")
    from tests.unit.federated_support import tiny

    d = tiny()
    d["policies"] = ["throwaway"]
    path = _write(tmp_path, d)
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "policies[0]: 'throwaway' is a migration policy; a federated scenario takes random, static_k" in err


def test_each_selection_policy_checks_its_own_site_references():
    from testbed.errors import SpecError
    from testbed.spec.load import scenario_from_dict
    from tests.unit.federated_support import tiny

    d = tiny()
    d["policies"] = [{"name": "random", "k": 9}, {"name": "static_k", "k": [1, 9]},
                     {"name": "powertrip", "k_init": 9}, {"name": "centralized", "site": "nowhere"}, "fixed_radius"]
    with pytest.raises(SpecError) as e:
        scenario_from_dict(d)
    assert e.value.problems == [
        ("policies[0].k", "9 is more than the 4 participating sites"),
        ("policies[1].k", "9 is more than the 4 participating sites"),
        ("policies[2].k_init", "more than the 4 participating sites"),
        ("policies[3].site", "unknown site 'nowhere'"),
    ]
