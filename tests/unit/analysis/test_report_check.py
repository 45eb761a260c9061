"""``testbed report --check``: a report re-derived from the data kept beside it (sim; no privileges).

Every way a committed report can stop being what its data says is tried here: a number edited in
report.md, a stored number changed, a metric renamed in the code without regenerating, runs from a
dirty tree or from two commits, and the judging code changed since the report was made."""

from __future__ import annotations

import gzip
import json
import shutil

import pytest
import yaml

from testbed.analysis import compare as cmp
from testbed.analysis import report_check as rc
from testbed.analysis.report import build_report
from testbed.cli import main
from tests.conftest import ROOT

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("chk")
    sweep = {"name": "chk", "scenario": str(ROOT / "scenarios" / "sweep-small.yaml"), "seeds": [0, 1, 2]}
    f = tmp / "s.yaml"
    f.write_text(yaml.safe_dump(sweep))
    assert main(["sweep", str(f), "--out", str(tmp / "out"), "--parallel", "1"]) == 0
    return tmp / "out"


@pytest.fixture
def clean_git(monkeypatch):
    """Runs and report as if made from a clean tree at COMMIT, and nothing changed since."""
    monkeypatch.setattr(rc, "changed_since", lambda commit, paths: [])
    monkeypatch.setattr("testbed.recorder.manifest.git_state", lambda: {"commit": COMMIT, "dirty": False})


def _report(sweep_dir, tmp_path, clean_git=None):
    rep = tmp_path / "rep"
    build_report([sweep_dir], rep, "check me")
    _set_runs_git(rep, {"commit": COMMIT, "dirty": False})
    return rep


def _rewrite_gz(path, change):
    obj = json.loads(gzip.open(path).read())
    change(obj)
    with gzip.open(path, "wb") as z:
        z.write(json.dumps(obj).encode())


def _set_runs_git(rep, git, first_only=False):
    def change(obj):
        for i, r in enumerate(obj["runs"]):
            if not first_only or i == 0:
                r["git"] = dict(git)
    _rewrite_gz(rep / "data" / "runs.json.gz", change)


def test_a_fresh_report_checks_clean(sweep_dir, tmp_path, clean_git):
    rep = _report(sweep_dir, tmp_path)
    res = rc.check_report(rep)
    assert res.problems == [] and res.stale == []
    assert main(["report", "--check", str(rep)]) == 0
    assert main(["report", "--check", str(tmp_path)]) == 0  # a folder holding reports


def test_a_number_edited_in_the_report_fails(sweep_dir, tmp_path, clean_git, capsys):
    rep = _report(sweep_dir, tmp_path)
    text = (rep / "report.md").read_text()
    i = next(i for i, line in enumerate(text.splitlines()) if line.startswith("| ") and " % " in line)
    lines = text.splitlines()
    lines[i] = lines[i].replace("%", "% ", 1)
    (rep / "report.md").write_text("\n".join(lines))
    res = rc.check_report(rep)
    assert any("report.md: line" in p for p in res.problems), res.problems
    assert main(["report", "--check", str(rep)]) == 1
    assert "FAILED" in capsys.readouterr().out


def test_a_stored_number_changed_fails(sweep_dir, tmp_path, clean_git):
    rep = _report(sweep_dir, tmp_path)

    def change(summaries):
        s = next(s for s in summaries if s["label"] == "feasibility_aware")
        s["summary"]["grid_kwh"] = s["summary"]["grid_kwh"] * 0.5
    _rewrite_gz(rep / "data" / "summaries.json.gz", change)
    problems = rc.check_report(rep).problems
    assert any("summaries.csv" in p for p in problems) and any("report.md" in p for p in problems), problems


@pytest.fixture(scope="module")
def paper_run(tmp_path_factory):
    """One run of the paper's setup (its claims are judged), static and feasibility_aware only."""
    out = tmp_path_factory.mktemp("paper") / "run"
    assert main(["run", str(ROOT / "scenarios" / "paper-migration-5node-7day.yaml"), "--substrate", "sim",
                 "--out", str(out), "--no-progress", "--set",
                 "policies=[static, {name: feasibility_aware, alpha: 0.1}]"]) == 0
    return out


def test_a_metric_renamed_in_the_code_without_regenerating_fails(paper_run, tmp_path, clean_git, monkeypatch):
    rep = _report(paper_run, tmp_path)
    assert rc.check_report(rep).problems == []
    renamed = tuple((k, t, pt, v, pol, "grid_energy_kwh" if m == "grid_kwh" else m)
                    for k, t, pt, v, pol, m in cmp.PAPER_CLAIMS)
    monkeypatch.setattr(cmp, "PAPER_CLAIMS", renamed)  # the code asks for a name the stored summaries lack
    problems = rc.check_report(rep).problems
    assert any("report.md: line" in p for p in problems), problems
    assert any("is not measured" in p and "feasibility_aware" in p for p in problems), problems


def test_runs_from_a_dirty_tree_or_two_commits_fail(sweep_dir, tmp_path, clean_git):
    rep = _report(sweep_dir, tmp_path)
    _set_runs_git(rep, {"commit": COMMIT, "dirty": True}, first_only=True)
    assert any("dirty tree" in p for p in rc.check_report(rep).problems)
    _set_runs_git(rep, {"commit": "f" * 40, "dirty": False}, first_only=True)
    assert any("2 commits" in p for p in rc.check_report(rep).problems)


def test_judging_code_changed_since_fails_and_producing_code_is_stale(sweep_dir, tmp_path, clean_git, monkeypatch):
    rep = _report(sweep_dir, tmp_path)
    monkeypatch.setattr(rc, "changed_since",
                        lambda commit, paths: ["testbed/analysis/claims.py"] if paths == rc.JUDGING_CODE
                        else ["testbed/substrate/sim/substrate.py"])
    res = rc.check_report(rep)
    assert any("code that judges results changed" in p for p in res.problems)
    assert res.stale == ["testbed/substrate/sim/substrate.py"]
    monkeypatch.setattr(rc, "changed_since", lambda commit, paths: [] if paths == rc.JUDGING_CODE
                        else ["testbed/substrate/sim/substrate.py"])
    assert main(["report", "--check", str(rep)]) == 0
    assert main(["report", "--check", "--strict", str(rep)]) == 1


def test_rebuild_renders_again_from_the_stored_data(sweep_dir, tmp_path, clean_git):
    rep = _report(sweep_dir, tmp_path)
    before = (rep / "report.md").read_text()
    shutil.rmtree(sweep_dir.parent / "gone", ignore_errors=True)
    (rep / "report.md").write_text("edited")
    assert main(["report", "--rebuild", str(rep)]) == 0
    assert (rep / "report.md").read_text() == before
    assert rc.check_report(rep).problems == []


def test_a_report_without_data_or_not_a_report_is_refused(tmp_path, capsys):
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "report.json").write_text(json.dumps({"format": "testbed-report/1"}))
    assert any("keeps no data" in p for p in rc.check_report(tmp_path / "old").problems)
    assert main(["report", "--check", str(tmp_path / "nothing-here")]) == 2
    assert "not a directory" in capsys.readouterr().err


def _reference(sweep_dir, tmp_path):
    """A results/reference-like folder: a report over the sweep, and the sweep's tables beside it."""
    ref = tmp_path / "ref"
    build_report([sweep_dir], ref / "report", "check me")
    (ref / sweep_dir.name).mkdir()
    for f in ("results.csv", "table.csv"):
        shutil.copy(sweep_dir / f, ref / sweep_dir.name / f)
    return ref


def test_sweep_tables_beside_the_reports_re_derive(sweep_dir, tmp_path):
    import pandas as pd

    ref = _reference(sweep_dir, tmp_path)
    assert rc.check_sweep_tables(ref).problems == []
    sweep = ref / sweep_dir.name
    results = pd.read_csv(sweep / "results.csv", dtype={"cell": str})
    metric = pd.read_csv(sweep / "table.csv")["metric"].iloc[0]
    edited = results.copy()
    edited.loc[0, metric] = float(edited.loc[0, metric]) * 1.5 + 1.0  # a raw number edited by hand
    edited.to_csv(sweep / "results.csv", index=False)
    problems = rc.check_sweep_tables(ref).problems
    assert any(f"results.csv: cell {results.loc[0, 'cell']}" in p and metric in p for p in problems), problems
    results.to_csv(sweep / "results.csv", index=False)
    table = pd.read_csv(sweep / "table.csv", dtype={"cell": str})
    table.loc[0, "mean"] = float(table.loc[0, "mean"]) + 1.0  # a mean that no longer follows from results.csv
    table.to_csv(sweep / "table.csv", index=False)
    assert any("table.csv" in p and "mean" in p for p in rc.check_sweep_tables(ref).problems)
    shutil.copy(sweep_dir / "table.csv", sweep / "table.csv")
    shutil.copytree(ref / "report", tmp_path / "kept")
    shutil.rmtree(ref / "report")
    (ref / "unrelated").mkdir()
    shutil.copytree(tmp_path / "kept", ref / "unrelated" / "report")  # not beside it: no report's data holds them
    with pytest.raises(Exception, match="neither a report"):
        rc.check_sweep_tables(ref)
    shutil.copytree(_reference(sweep_dir, tmp_path / "other") / "report", ref / "other-report")
    assert rc.check_sweep_tables(ref).problems == []  # another report holding the same runs does
    sweep.rename(ref / "renamed")
    assert any("renamed/results.csv: its runs are in no report's data" in p for p in rc.check_sweep_tables(ref).problems)


def test_another_substrates_package_does_not_make_a_report_stale(sweep_dir, tmp_path, clean_git, monkeypatch):
    """The report's runs are on sim: a change in the Mininet substrate's own code leaves them fresh; its
    __init__ (imported by every run), the shared fabric code and the sim's own code do not."""
    rep = _report(sweep_dir, tmp_path)
    changed = ["testbed/substrate/mininet/fabric.py", "testbed/substrate/local/substrate.py"]
    monkeypatch.setattr(rc, "changed_since", lambda commit, paths: [] if paths == rc.JUDGING_CODE else changed)
    assert rc.check_report(rep).stale == []
    assert main(["report", "--check", "--strict", str(rep)]) == 0
    for counted in ("testbed/substrate/mininet/__init__.py", "testbed/netem/fabric.py",
                    "testbed/substrate/sim/substrate.py", "testbed/substrate/emulated/base.py"):
        changed = ["testbed/substrate/mininet/fabric.py", counted]
        assert rc.check_report(rep).stale == [counted]
    assert rc.producing_for({"sim", "mininet"}, ["testbed/substrate/mininet/fabric.py"]) == [
        "testbed/substrate/mininet/fabric.py"]
    assert rc.producing_for({"sim"}, ["testbed/substrate/newsub/x.py"]) == ["testbed/substrate/newsub/x.py"]


def test_every_built_in_substrate_has_its_own_package_named():
    """SUBSTRATE_PACKAGES names the package each registered substrate is made in (a new substrate that
    is left out only counts as producing code for every report, which is safe but coarse)."""
    import testbed.substrate  # noqa: F401  (registers the built-in substrates)
    from testbed.substrate.registry import SUBSTRATES

    built_in = {name: SUBSTRATES.get(name).make.__module__ for name in SUBSTRATES.names()}
    built_in = {name: m for name, m in built_in.items() if m.startswith("testbed.")}  # not a plug-in a test added
    assert {"sim", "netns", "mininet", "local"} <= set(built_in)
    for name, module in built_in.items():
        assert f"{module.replace('.', '/')}/" == rc.SUBSTRATE_PACKAGES[name], name


def test_tool_code_does_not_make_a_report_stale_and_the_rest_does(tmp_path, monkeypatch):
    """In a real git history: a change to the benchmarks, the qemu guest's runner or their commands
    (TOOL_CODE) is not producing code; the same change next to them is, and so is a scenario."""
    import subprocess

    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    files = ["testbed/bench/shaping.py", "testbed/vm/run.py", "testbed/cli/cmd_bench.py", "testbed/cli/cmd_vm.py",
             "testbed/cli/cmd_run.py", "testbed/benchmarks.py", "testbed/netem/fabric.py", "scenarios/q.yaml",
             "testbed/analysis/claims.py"]
    for f in files:
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text("x = 1\n")
    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "first")
    commit = subprocess.run(["git", "-C", str(tmp_path), "rev-parse", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
    for f in files:
        (tmp_path / f).write_text("x = 2\n")
    monkeypatch.setattr(rc, "_repo", lambda: tmp_path)
    assert sorted(rc.changed_since(commit, rc.PRODUCING_CODE)) == [
        "scenarios/q.yaml", "testbed/benchmarks.py", "testbed/cli/cmd_run.py", "testbed/netem/fabric.py"]
    assert rc.changed_since(commit, rc.JUDGING_CODE) == ["testbed/analysis/claims.py"]


def _tool_module(name: str) -> bool:
    """True where module ``name`` is made by a file or package of TOOL_CODE."""
    for path in rc.TOOL_CODE:
        mod = path.removesuffix(".py").replace("/", ".")
        if name == mod or name.startswith(mod + "."):
            return True
    return False


def _imported_testbed_modules(stderr: str) -> set[str]:
    """The ``testbed`` modules a Python run with ``-X importtime`` loaded (its stderr)."""
    import re

    return set(re.findall(r"^import time:.*\|\s+(testbed(?:\.\w+)*)\s*$", stderr, re.M))


def assert_a_run_loads_no_tool_code(argv: list[str], cwd) -> None:
    """Run ``python -X importtime -m testbed ARGV`` and fail if it loaded any module of TOOL_CODE (or
    loaded no testbed module at all: the measurement would hold nothing)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}  # child interpreters log theirs too, where shown
    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "testbed", *argv], cwd=cwd, capture_output=True,
                       text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    loaded = _imported_testbed_modules(r.stderr)
    assert "testbed.runner" in loaded, sorted(loaded)[:20]
    assert not {m for m in loaded if _tool_module(m)}, sorted(m for m in loaded if _tool_module(m))


def test_no_module_outside_the_tools_imports_them():
    """Only TOOL_CODE itself and `testbed net`'s command (not a run) import the benchmarks or the
    guest's runner, at any depth of a function: TOOL_CODE can leave reports fresh."""
    import ast

    pkg = ROOT / "testbed"
    importers: dict[str, list[str]] = {}
    for f in sorted(pkg.rglob("*.py")):
        rel = str(f.relative_to(ROOT))
        if any(rel == p or rel.startswith(p + "/") for p in rc.TOOL_CODE):
            continue
        for node in ast.walk(ast.parse(f.read_text(), rel)):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            for n in names:
                if _tool_module(n):
                    importers.setdefault(rel, []).append(n)
    assert set(importers) <= {"testbed/cli/cmd_net.py"}, importers
    assert _tool_module("testbed.bench.shaping") and _tool_module("testbed.cli.cmd_vm")
    assert not _tool_module("testbed.benchmarks") and not _tool_module("testbed.cli.cmd_run")


def test_a_run_and_a_sweep_on_sim_load_no_tool_code(tmp_path):
    """What TOOL_CODE claims, measured: `testbed run` of the quick start and `testbed sweep` on sim
    never load a module of it (Python's own import log, ``-X importtime``)."""
    assert_a_run_loads_no_tool_code(["run", str(ROOT / "scenarios" / "quickstart.yaml"), "--substrate", "sim",
                                     "--out", str(tmp_path / "run"), "--no-progress", "--no-plots"], tmp_path)
    sweep = tmp_path / "s.yaml"
    sweep.write_text(yaml.safe_dump({"name": "tools", "scenario": str(ROOT / "scenarios" / "sweep-small.yaml"),
                                     "seeds": [0], "grid": {"cross_traffic": ["none", "heavy"]}}))
    assert_a_run_loads_no_tool_code(["sweep", str(sweep), "--out", str(tmp_path / "sweep"), "--parallel", "1",
                                     "--no-progress"], tmp_path)
