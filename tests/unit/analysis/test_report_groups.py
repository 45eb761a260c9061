"""testbed report pools runs as seeds only within one experiment (testbed.analysis.groups): the
resolved scenario without its seed, hashed; it refuses a label that mixes experiments and a seed
counted twice, in one line naming the run directories (and the field), writing nothing."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
import yaml

from testbed.analysis import validation as v
from testbed.analysis.groups import check_groups, groups
from testbed.analysis.scenario_id import first_difference, scenario_hash
from testbed.cli import main
from tests.conftest import ROOT
from tests.unit.sweep_support import tiny_scenario, write_sweep


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    """Runs of the tiny scenario (12 h, sim): seeds 1 and 2, seed 1 again, seed 1 at --set
    duration_h=6, and a sweep of 2 cells x 2 seeds."""
    d = tmp_path_factory.mktemp("groups")
    scen = d / "scen.yaml"
    scen.write_text(yaml.safe_dump(tiny_scenario(), sort_keys=False))
    for name, extra in (("s1", ["--seed", "1"]), ("s2", ["--seed", "2"]), ("s1-again", ["--seed", "1"]),
                        ("s1-6h", ["--seed", "1", "--set", "duration_h=6"])):
        assert main(["run", str(scen), "--out", str(d / name), "--no-progress", "--no-plots", *extra]) == 0
    sweep = write_sweep(d / "sw", {"seeds": [1, 2], "grid": {"traces.bandwidth.steady_degradation_pct": [0, 50]}})
    assert main(["sweep", str(sweep), "--out", str(d / "sweep"), "--parallel", "1"]) == 0
    return d


def _refused(capsys, dirs: list[Path], out: Path) -> str:
    assert main(["report", *map(str, dirs), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: ") and "Traceback" not in err, err
    assert not out.exists()  # nothing written
    return err


def test_runs_of_one_scenario_at_other_durations_are_refused_naming_the_field(ws, tmp_path, capsys):
    # the review's case: the same seed, --set duration_h=... : not two seeds of one setting
    err = _refused(capsys, [ws / "s1", ws / "s1-6h"], tmp_path / "rep")
    assert f"{ws / 's1'} and {ws / 's1-6h'}" in err and "differ in duration_h" in err, err
    assert "tiny" not in err and "6.0" not in err  # names the field, never a value from the manifests


def test_two_seeds_of_one_resolved_scenario_are_one_group_of_two(ws, tmp_path, capsys):
    runs = v.find_runs(ws / "s1") + v.find_runs(ws / "s2")
    assert runs[0].scenario_hash and runs[0].scenario_hash == runs[1].scenario_hash
    # the hash is sha256 of the canonical JSON (sorted keys) of the resolved scenario without its seed
    body = {k: x for k, x in runs[0].resolved.items() if k != "seed"}
    assert runs[0].scenario_hash == hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]
    a, b = runs[0].resolved, runs[1].resolved
    assert {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)} == {"seed"}  # all that differs between seeds
    check_groups(runs)
    assert [len(g) for g in groups(runs).values()] == [2]
    assert main(["report", str(ws / "s1"), str(ws / "s2"), "--out", str(tmp_path / "rep")]) == 0
    capsys.readouterr()
    rows = [ln for ln in (tmp_path / "rep" / "report.md").read_text().splitlines() if ln.startswith("| tiny | sim | - |")]
    assert rows and all(re.search(r"\| 2 \|", ln) for ln in rows), rows  # judged over 2 seeds


def test_a_seed_counted_twice_is_refused(ws, tmp_path, capsys):
    err = _refused(capsys, [ws / "s1", ws / "s1"], tmp_path / "a")
    assert err == f"error: {ws / 's1'}: given twice (one run would count as two seeds); give each run once\n"
    err = _refused(capsys, [ws / "s1", ws / "s2", ws / "s1-again"], tmp_path / "b")
    assert f"{ws / 's1'} and {ws / 's1-again'}" in err and "same seed (1)" in err, err
    trial = next((ws / "sweep" / "trials").glob("*/seed-1"))
    err = _refused(capsys, [ws / "sweep", trial], tmp_path / "c")  # a sweep beside one of its own trials
    assert f"{trial}: given twice" in err, err


def test_a_sweep_passes_with_each_cell_its_own_group(ws):
    runs = v.find_runs(ws / "sweep")
    check_groups(runs)
    by = groups(runs)
    assert len(runs) == 4 and len(by) == 2 and all(len(g) == 2 for g in by.values())
    assert len({(r.scenario, r.substrate, r.cell) for r in runs}) == 2  # a label per group
    # the same experiment in another label (a run beside the sweep's 0 % cell, seed 1 in both): its own
    # group, never pooled with the cell's seeds
    alone = v.find_runs(ws / "s1")
    zero = [r for r in runs if r.cell.startswith("000-")]
    assert alone[0].scenario_hash == zero[0].scenario_hash and alone[0].seed in {r.seed for r in zero}
    check_groups(runs + alone)
    assert sorted(len(g) for g in groups(runs + alone).values()) == [1, 2, 2]


def _planned_runs(sweep_file: Path) -> list[v.Run]:
    """The sweep's trials as the report would read them, from its plan (nothing run)."""
    from testbed.sweep import api

    plan = api.plan(sweep_file, "sim")
    return [v.Run(Path("/nowhere") / sweep_file.stem / t.rel_dir, plan.substrate, t.seed, t.cell.loaded.scenario.name,
                  t.cell.id, {}, {**t.cell.loaded.scenario.model_dump(mode="json"), "seed": t.seed}) for t in plan.trials]


def test_planned_trials_hash_as_the_runs_do(ws):
    planned = {(r.cell, r.seed): r.scenario_hash for r in _planned_runs(ws / "sw" / "sweep.yaml")}
    assert planned == {(r.cell, r.seed): r.scenario_hash for r in v.find_runs(ws / "sweep")}


def test_the_committed_sweeps_pass_alone_and_all_together():
    """Every sweep under sweeps/ (as sim trials: the substrate only splits groups further), alone and
    all together with the paper scenario's own run: so any report over some of them (scripts/
    reference.sh's) passes. The same experiment appears in several (validate-alpha's alpha = 0.1 is
    validate-degradation's 0 %): as separate groups, never pooled."""
    from testbed.spec.load import load_scenario

    every = {f.stem: _planned_runs(f) for f in sorted((ROOT / "sweeps").glob("*.yaml"))}
    assert len(every) >= 10
    for name, runs in every.items():
        check_groups(runs)
        assert len({r.scenario_hash for r in runs}) == len({r.cell for r in runs}), name  # each cell its own hash
    paper = load_scenario(ROOT / "scenarios" / "paper-migration-5node-7day.yaml").scenario.model_dump(mode="json")
    together = [v.Run(Path("/nowhere/paper-sim"), "sim", paper["seed"], paper["name"], "", {}, paper)]
    together += [r for runs in every.values() for r in runs]
    check_groups(together)
    by_hash: dict[str, set] = {}
    for r in together:
        by_hash.setdefault(r.scenario_hash, set()).add((r.scenario, r.cell))
    assert any(len(labels) > 1 for labels in by_hash.values())  # the case above is really there


def test_first_difference_names_a_dotted_path_and_never_odd_text():
    a = {"duration_h": 48.0, "policies": [{"name": "static"}, {"name": "fa", "alpha": 0.1}], "seed": 1}
    assert first_difference(a, {**a, "duration_h": 24.0}) == "duration_h"
    b = {**a, "policies": [{"name": "static"}, {"name": "fa", "alpha": 0.2}]}
    assert first_difference(a, b) == "policies[1].alpha"
    assert first_difference(a, {**a, "policies": a["policies"][:1]}) == "policies"
    assert first_difference({"x": 1}, {"x": 1.0}) == "x"  # as the hash sees them: 1 and 1.0 hash apart
    assert scenario_hash({"x": 1}) != scenario_hash({"x": 1.0})
    assert first_difference({"t": {"a\nb$(x)": 1}}, {"t": {"a\nb$(x)": 2}}) == "t.?"
    assert first_difference(a, dict(a)) is None
    assert scenario_hash({}) == "" and scenario_hash({**a, "seed": 9}) == scenario_hash(a)


def test_a_run_without_a_resolved_scenario_is_not_pooled_with_one_that_has_it(tmp_path):
    resolved = {"name": "x", "duration_h": 24.0, "seed": 1}
    old = v.Run(tmp_path / "old", "sim", 2, "x", "", {}, {})
    new = v.Run(tmp_path / "new", "sim", 1, "x", "", {}, resolved)
    assert old.scenario_hash == ""
    with pytest.raises(v.ReportError, match=re.escape(f"scenario.resolved (not recorded in {tmp_path / 'old'}")):
        check_groups([old, new])
    check_groups([old, v.Run(tmp_path / "old2", "sim", 3, "x", "", {}, {})])  # by their label, other seeds
