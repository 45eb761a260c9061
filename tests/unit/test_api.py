"""The Python API (testbed.load / run / open_results / sweep) and `testbed run --set`, which is a
thin layer over it."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import testbed
from testbed.cli import main
from testbed.errors import SpecError

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "scenarios" / "quickstart.yaml"
MIGRATION_TABLES = ("migrations", "jobs", "timeseries", "decisions", "power")


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if b is None and isinstance(a, float) and math.isnan(a):
        return True
    return a == b


@pytest.fixture(scope="module")
def api_and_cli(tmp_path_factory):
    """The quick start through the API (temporary directory) and through the CLI (--out)."""
    res = testbed.run("scenarios/quickstart.yaml" if Path("scenarios/quickstart.yaml").is_file() else QUICKSTART,
                      substrate="sim")
    out = tmp_path_factory.mktemp("cli") / "qs"
    assert main(["run", str(QUICKSTART), "--substrate", "sim", "--out", str(out), "--no-progress"]) == 0
    yield res, out
    import shutil

    shutil.rmtree(res.path)  # out=None wrote to a new temporary directory, which stays for the user


def test_import_testbed_is_light():
    code = ("import sys, testbed; heavy = [m for m in ('pandas', 'numpy', 'pydantic', 'matplotlib', 'testbed.api') "
            "if m in sys.modules]; print(','.join(heavy))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert r.stdout.strip() == ""


def test_run_returns_dataframes_with_policy_columns(api_and_cli):
    res, _ = api_and_cli
    labels = ["static", "energy_only", "feasibility_aware", "no_filter"]
    assert res.labels == labels
    assert list(res.summary["label"]) == labels and list(res.summary["policy"]) == labels
    assert set(res.summary["run_id"]) == {res.path.name} and set(res.summary["seed"]) == {res.manifest["seed"]}
    assert res.path.is_dir() and res.manifest["format"] == "testbed-results/1"
    for name in MIGRATION_TABLES:
        df = getattr(res, name)
        assert isinstance(df, pd.DataFrame) and list(df.columns[:4]) == ["run_id", "seed", "policy", "label"], name
        assert df["policy"].notna().all() and set(df["label"]) <= set(labels), name
    assert set(res.jobs["label"]) == set(labels)  # every policy has jobs
    # each row comes from its policy's own file
    own = pd.read_parquet(res.path / "energy_only" / "jobs.parquet")
    got = res.jobs[res.jobs["label"] == "energy_only"].drop(columns=["run_id", "seed", "policy", "label"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(got, own.drop(columns=["policy", "label"]))  # the file has them too
    with pytest.raises(AttributeError, match="no 'rounds' table"):
        res.rounds


def test_summary_equals_the_cli_summary_files(api_and_cli):
    res, out = api_and_cli
    for _, row in res.summary.iterrows():
        on_disk = json.loads((out / row["label"] / "summary.json").read_text())
        assert set(on_disk) <= set(row.index)
        bad = {k: (row[k], v) for k, v in on_disk.items() if not _same(row[k], v)}
        assert not bad, (row["label"], bad)


def test_open_results_reads_a_cli_directory(api_and_cli):
    _, out = api_and_cli
    res = testbed.open_results(out)
    assert len(res.summary) == 4 and len(res.migrations) > 0
    with pytest.raises(SpecError, match="not a testbed results directory"):
        testbed.open_results(out / "static")


def test_results_written_before_the_renames_read_in_todays_names_units_and_dtypes(api_and_cli, tmp_path):
    """An older run (size_gb, minutes and hours, "done", all-None object columns) reads as today's in the API
    and the report."""
    import shutil

    from testbed.analysis.validation import find_runs, gather

    _, out = api_and_cli
    old = shutil.copytree(out, tmp_path / "old")
    for f in old.glob("*/migrations.parquet"):  # as written before: size_gb, minutes, all-None object columns
        m = pd.read_parquet(f).rename(columns={"checkpoint_gb": "size_gb"})
        m["predicted_breakeven_s"] /= 60.0
        m = m.rename(columns={"predicted_breakeven_s": "predicted_breakeven_min"})
        m["actual_total_s"] = pd.Series([None] * len(m), dtype=object)
        m.to_parquet(f, index=False)
    for f in old.glob("*/jobs.parquet"):  # hours, and "done"
        j = pd.read_parquet(f)
        j["jct_s"] /= 3600.0
        j = j.rename(columns={"jct_s": "jct_h"}).assign(status=j["status"].replace({"completed": "done"}))
        j.to_parquet(f, index=False)
    now, then = testbed.open_results(out), testbed.open_results(old)
    want, got = now.migrations, then.migrations
    assert "size_gb" not in got and got["checkpoint_gb"].tolist() == want["checkpoint_gb"].tolist() and len(want)
    assert got["predicted_breakeven_s"].round(6).tolist() == want["predicted_breakeven_s"].round(6).tolist()
    assert str(got["actual_total_s"].dtype) == "float64"
    assert then.jobs["status"].tolist() == now.jobs["status"].tolist()
    assert (then.jobs["jct_s"] - now.jobs["jct_s"]).abs().max() < 1e-6
    migs, _ = gather(find_runs(old))
    assert "size_gb" not in migs and migs["predicted_transfer_plain_s"].notna().all()


def test_load_applies_overrides_by_path_and_validates():
    sc = testbed.load(QUICKSTART, overrides={"duration_h": 24, "policies[feasibility_aware].alpha": 0.2})
    assert sc.duration_h == 24
    fa = next(p for p in sc.policies if p.name == "feasibility_aware")
    assert fa.alpha == 0.2
    with pytest.raises(SpecError) as e:
        testbed.load(QUICKSTART, overrides={"duraton_h": 12})
    assert e.value.problems == [("overrides duraton_h", "unknown field (did you mean duration_h?)")]
    with pytest.raises(SpecError, match="no entry with label or name 'nope'"):
        testbed.load(QUICKSTART, overrides={"policies[nope].alpha": 0.2})


def test_an_edit_that_skipped_validation_is_refused_before_it_runs(tmp_path):
    sc = testbed.load(QUICKSTART)
    bad = sc.model_copy(update={"duration_h": -3, "policies": ["static", "nonesuch"]})
    with pytest.raises(SpecError) as e:
        testbed.run(bad, out=tmp_path / "r")
    where = [w for w, _ in e.value.problems]
    assert "duration_h" in where and "policies[1]" in where
    assert not (tmp_path / "r").exists()
    # the supported edit: load() of a Scenario, validated; the original file is kept beside the run
    short = testbed.load(sc, {"duration_h": 24, "workloads.arrivals.until_h": 20})
    assert short.duration_h == 24 and sc.duration_h == 48


def test_an_edited_scenario_runs_and_records_what_ran(tmp_path):
    sc = testbed.load(QUICKSTART, overrides={"duration_h": 24, "policies": ["static", "feasibility_aware"]})
    res = testbed.run(sc, out=tmp_path / "r", plots=False)
    assert res.labels == ["static", "feasibility_aware"]
    ran = testbed.load(res.path / "scenario.yaml")
    assert ran.duration_h == 24 and [p.name for p in ran.policies] == ["static", "feasibility_aware"]
    assert (res.path / "scenario.original.yaml").read_text() == QUICKSTART.read_text()
    orig = res.manifest["scenario"]["original"]
    import hashlib

    assert orig["sha256"] == hashlib.sha256(QUICKSTART.read_bytes()).hexdigest()


def test_cli_set_changes_the_run_and_the_saved_scenario(tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["run", str(QUICKSTART), "--set", "duration_h=24", "--set", "policies[feasibility_aware].alpha=0.2",
                 "--out", str(out), "--no-progress", "--no-plots"]) == 0
    assert not list(out.glob("*.png")) and not list(out.glob("*/*.png"))  # --no-plots: tables only
    ran = testbed.load(out / "scenario.yaml")
    assert ran.duration_h == 24
    assert next(p for p in ran.policies if p.name == "feasibility_aware").alpha == 0.2
    man = json.loads((out / "manifest.json").read_text())
    assert man["scenario"]["resolved"]["duration_h"] == 24
    assert man["scenario"]["original"]["overrides"] == {"duration_h": 24, "policies[feasibility_aware].alpha": 0.2}
    assert (out / "scenario.original.yaml").read_text() == QUICKSTART.read_text()
    ts = pd.read_parquet(out / "static" / "timeseries.parquet")
    assert ts["t_s"].max() < 24 * 3600


@pytest.mark.parametrize("setting, named", [
    ("duraton_h=12", "error: --set duraton_h: unknown field (did you mean duration_h?)"),
    ("duration_h=-1", "error: --set duration_h: must be > 0"),
    ("policies[nope].alpha=1", "error: --set policies[nope].alpha: policies: no entry with label or name 'nope'"),
    ("duration_h", "error: --set: expected PATH=VALUE"),
])  # a shorter duration_h drops what begins after the run: tests/unit/spec/test_spec_trim.py
def test_cli_bad_override_exits_2_naming_the_path(tmp_path, capsys, setting, named):
    assert main(["run", str(QUICKSTART), "--set", setting, "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(named), err
    assert not (tmp_path / "r").exists()


def test_validate_names_each_file_and_exits_2(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(QUICKSTART.read_text().replace("duration_h: 48", "duration_h: -48"))
    other = tmp_path / "c.yaml"
    other.write_text(QUICKSTART.read_text())
    assert main(["validate", str(QUICKSTART), str(bad), str(other)]) == 2
    cap = capsys.readouterr()
    assert f"{QUICKSTART}: ok" in cap.out and f"{other}: ok" in cap.out
    assert cap.err.strip().splitlines() == [f"error: {bad}: duration_h: must be > 0.0 (got -48)"]


def test_sweep_given_a_scenario_says_so_in_one_line(capsys):
    assert main(["sweep", str(QUICKSTART)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "this is a scenario, not a sweep" in err[0], err


def test_unknown_policy_names_are_answered_per_study():
    with pytest.raises(SpecError) as e:
        testbed.load(QUICKSTART, overrides={"policies[0]": "powertrp"})
    [(where, msg)] = e.value.problems
    assert "migration study has: static, energy_only, feasibility_aware" in msg and "random" not in msg
    from tests.unit.federated_support import tiny

    from testbed.spec import scenario_from_dict

    d = tiny()
    d["policies"] = ["powertrp"]
    with pytest.raises(SpecError) as e:
        scenario_from_dict(d)
    [(where, msg)] = e.value.problems
    assert "did you mean powertrip?" in msg and "PowerTrip" in msg and "feasibility_aware" not in msg


def test_the_federated_study_through_the_api(tmp_path):
    from tests.unit.federated_support import tiny_scenario

    res = testbed.run(tiny_scenario(), out=tmp_path / "fl", plots=False)
    assert set(res.tables) == {"rounds", "sites", "candidates"}
    assert "powertrip" in set(res.summary["policy"])
    for df in (res.rounds, res.sites):
        assert list(df.columns[:4]) == ["run_id", "seed", "policy", "label"] and df["label"].notna().all()
    for _, row in res.summary.iterrows():
        on_disk = json.loads((res.path / row["label"] / "summary.json").read_text())
        assert all(_same(row[k], v) for k, v in on_disk.items() if not isinstance(v, (dict, list)))


def test_sweep_returns_its_table(tmp_path, capsys):
    sweep = tmp_path / "s.yaml"
    sweep.write_text(f"scenario: {QUICKSTART}\nseeds: [1]\ngrid:\n  duration_h: [24, 36]\n"
                     "metrics: [grid_kwh]\n")
    table = testbed.sweep(sweep, tmp_path / "out", parallel=1)
    assert isinstance(table, pd.DataFrame) and set(table["metric"]) == {"grid_kwh"}
    assert table.attrs["failed"] == [] and len(table) == 2 * 4
    assert table.equals(pd.read_csv(tmp_path / "out" / "table.csv"))
    progress = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("[")]
    assert progress[0].startswith("[1/2]") and "; ETA " in progress[0] and "ETA" not in progress[-1], progress


def test_a_sweep_whose_trials_all_failed_raises_with_the_script_guard_hint(tmp_path, monkeypatch):
    """No table to return: one error, and for a script the reason trials of an unguarded call die."""
    import types

    import testbed.sweep.api as sweep_api
    from testbed.errors import TestbedError

    def all_failed(out):
        df = pd.DataFrame(columns=["cell", "policy", "metric", "n", "mean", "std", "ci95"])
        df.attrs.update(path=str(tmp_path), failed=["trials/000/seed-1", "trials/000/seed-2"])
        return df

    monkeypatch.setattr(sweep_api, "run", lambda *a, **kw: types.SimpleNamespace(out=tmp_path, failed=["t0", "t1"]))
    monkeypatch.setattr(sweep_api, "plan", lambda path, substrate: None)
    monkeypatch.setattr(sweep_api, "table", all_failed)
    script = types.ModuleType("__main__")
    script.__file__, script.__spec__ = str(tmp_path / "analysis.py"), None
    monkeypatch.setitem(sys.modules, "__main__", script)
    with pytest.raises(TestbedError, match=r"s\.yaml: all 2 trials failed .*analysis\.py first: .*"
                                           r"under `if __name__ == \"__main__\":`"):
        testbed.sweep("s.yaml")
    del script.__file__  # a notebook's __main__ has no file: no hint
    with pytest.raises(TestbedError) as e:
        testbed.sweep("s.yaml")
    assert str(e.value).endswith("trial.json)")


def test_run_and_sweep_take_the_figure_format_and_style_and_refuse_a_bad_one_before_any_work(tmp_path):
    out = tmp_path / "svg"
    res = testbed.run(QUICKSTART, out=out, progress=False,
                      figure_format="svg", figure_style="ggplot")
    figures = sorted(p.suffix for p in out.rglob("*") if p.suffix in (".png", ".svg", ".pdf"))
    assert figures and set(figures) == {".svg"}
    assert res.path == out
    for bad, named in (({"figure_format": "jpeg"}, "figure format 'jpeg'"),
                       ({"figure_style": "no-such-style"}, "figure style 'no-such-style'")):
        with pytest.raises(SpecError, match=named):
            testbed.run(QUICKSTART, out=tmp_path / "bad", progress=False, **bad)
        assert not (tmp_path / "bad").exists()
        with pytest.raises(SpecError, match=named):
            testbed.sweep(QUICKSTART, tmp_path / "bad-sweep", seeds=2, **bad)
        assert not (tmp_path / "bad-sweep").exists()
