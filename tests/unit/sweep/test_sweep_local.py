"""``testbed sweep`` on this machine: a 2 x 2 x 3-seed sweep, its tables, resume, failed trials."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
from scipy import stats

from testbed.cli import main
from tests.unit.sweep_support import tiny_scenario, write_sweep

N_TRIALS = 12
POLICIES = ["static", "feasibility_aware"]


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sweep")
    path = write_sweep(folder)
    out = folder / "out"
    assert main(["sweep", str(path), "--out", str(out), "--parallel", "2"]) == 0
    return path, out


def test_layout_and_one_run_directory_per_trial(swept):
    _, out = swept
    assert {"sweep.yaml", "sweep.json", "trials.csv", "results.parquet", "results.csv", "table.csv",
            "table.md", "trials"} <= {p.name for p in out.iterdir()}
    trials = sorted(out.glob("trials/*/seed-*"))
    assert len(trials) == N_TRIALS
    for d in trials:
        rec = json.loads((d / "trial.json").read_text())
        assert rec["status"] == "completed" and rec["backend"] == "local" and rec["substrate"] == "sim"
        manifest = json.loads((d / "manifest.json").read_text())  # a `testbed run` results directory
        assert manifest["seed"] == rec["seed"] == int(d.name.removeprefix("seed-"))
        assert manifest["scenario"]["resolved"]["feasibility"]["alpha"] == rec["params"]["feasibility.alpha"]
        assert {p.name for p in d.iterdir()} >= {"comparison.md", "scenario.yaml", *POLICIES}
    plan = json.loads((out / "sweep.json").read_text())
    assert len(plan["cells"]) == 4 and len(plan["trials"]) == N_TRIALS
    assert set(pd.read_csv(out / "trials.csv")["status"]) == {"completed"}


def test_results_one_row_per_trial_and_policy(swept):
    _, out = swept
    res = pd.read_parquet(out / "results.parquet")
    assert len(res) == N_TRIALS * len(POLICIES)
    assert list(res.columns[:7]) == ["cell", "param_traces_bandwidth_steady_degradation_pct", "param_feasibility_alpha",
                                     "param_policies_feasibility_aware_alpha", "seed", "policy", "label"]
    assert all(c.isidentifier() for c in res.columns)  # df.query and attribute access take every column
    assert "wall_s" not in res.columns and "grid_kwh" in res.columns
    row = res.iloc[5]
    summary = json.loads((out / "trials" / row["cell"] / f"seed-{row['seed']}" / row["label"] / "summary.json").read_text())
    assert row["grid_kwh"] == summary["grid_kwh"]
    assert list(res["seed"][:6]) == [0, 0, 1, 1, 2, 2]
    csv = pd.read_csv(out / "results.csv")
    assert len(csv) == len(res) and list(csv.columns) == list(res.columns)


def test_table_has_mean_std_n_and_student_t_ci(swept):
    _, out = swept
    res = pd.read_parquet(out / "results.parquet")
    table = pd.read_csv(out / "table.csv")
    assert list(table.columns[-7:]) == ["policy", "label", "metric", "n", "mean", "std", "ci95"]
    assert len(table) == 4 * len(POLICIES) * table["metric"].nunique()
    r = table[(table["metric"] == "grid_kwh") & (table["label"] == "static")].iloc[0]
    x = res[(res["cell"] == r["cell"]) & (res["label"] == "static")]["grid_kwh"].to_numpy()
    assert r["n"] == 3 and x.std(ddof=1) > 0  # the seeds really differ
    assert r["mean"] == pytest.approx(x.mean())
    assert r["ci95"] == pytest.approx(stats.t.ppf(0.975, 2) * x.std(ddof=1) / math.sqrt(3))
    md = (out / "table.md").read_text()
    assert "## grid_kwh" in md and "| cell | traces.bandwidth.steady_degradation_pct |" in md
    assert "12 planned, 12 done, 0 failed" in md


def test_resume_skips_done_trials(swept, capsys):
    path, out = swept
    marks = {p: p.stat().st_mtime_ns for p in out.glob("trials/*/seed-*/trial.json")}
    table = (out / "table.csv").read_bytes()
    assert main(["sweep", str(path), "--out", str(out)]) == 0
    assert "12 done already, 0 to run" in capsys.readouterr().err
    assert {p: p.stat().st_mtime_ns for p in marks} == marks
    one = sorted(marks)[7]
    one.unlink()  # as if the sweep had been interrupted during this trial
    assert main(["sweep", str(path), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "11 done already, 1 to run" in err and f"{one.parent.relative_to(out)}: completed" in err
    assert (out / "table.csv").read_bytes() == table  # deterministic: the re-run trial gives the same numbers
    one.unlink()
    assert main(["sweep", str(path), "--out", str(out), "--no-progress"]) == 0
    cap = capsys.readouterr()
    assert ": completed" not in cap.err and "done already" not in cap.err  # no line per trial
    assert "12 trials: 11 reused, 1 run, 0 failed" in cap.out


def test_failed_trial_is_recorded_and_rerun_later(tmp_path, capsys):
    sc = tiny_scenario()
    bad = tmp_path / "site-a.csv"
    bad.write_text("this is not a trace\n")
    path = write_sweep(tmp_path, {"seeds": [1], "grid": {}, "variants": [
        {"name": "ok"}, {"name": "csv", "set": {"traces.renewable.a": {"kind": "csv", "file": "site-a.csv"}}}]},
        scenario=sc)
    out = tmp_path / "out"
    assert main(["sweep", str(path), "--out", str(out)]) == 1
    captured = capsys.readouterr()
    assert "2 trials: 0 reused, 2 run, 1 failed" in captured.out
    assert "failed: trials/001-csv/seed-1" in captured.err
    rec = json.loads((out / "trials/001-csv/seed-1/trial.json").read_text())
    assert rec["status"] == "failed" and "site-a.csv" in rec["error"] and rec["traceback"]
    assert not (out / "trials/001-csv/seed-1/manifest.json").exists()
    trials = pd.read_csv(out / "trials.csv")
    assert list(trials["status"]) == ["completed", "failed"]
    assert set(pd.read_csv(out / "results.csv")["cell"]) == {"000-ok"}
    bad.write_text("timestamp,value\n" + "".join(f"{t},{1.5}\n" for t in range(0, 12 * 3600 + 1, 300)))
    assert main(["sweep", str(path), "--out", str(out)]) == 0
    assert "1 done already, 1 to run" in capsys.readouterr().err
    assert set(pd.read_csv(out / "results.csv")["cell"]) == {"000-ok", "001-csv"}
    assert main(["sweep", str(path), "--out", str(out), "--force"]) == 0
    assert "0 done already, 2 to run" in capsys.readouterr().err


def test_refuses_an_out_dir_that_is_not_a_sweep(tmp_path, capsys):
    path = write_sweep(tmp_path, {"seeds": 1, "grid": {}})
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert main(["sweep", str(path), "--out", str(out)]) == 2
    assert "--out" in capsys.readouterr().err
    assert [p.name for p in out.iterdir()] == ["notes.txt"]
