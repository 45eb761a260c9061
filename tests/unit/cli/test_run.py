"""``testbed run``: the results directory, determinism, and nothing half-written on failure."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from testbed.cli import main
from tests.conftest import ROOT

QUICK = str(ROOT / "scenarios" / "quickstart.yaml")
SUMMARY_KEYS = {"grid_kwh", "renewable_kwh", "mean_jct_s", "p95_jct_s", "jobs_completed", "migrations",
                "migrations_overran", "migration_overhead_frac"}
POLICIES = ("static", "energy_only", "feasibility_aware", "no_filter")


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "q1"
    assert main(["run", QUICK, "--out", str(out), "--no-progress"]) == 0
    return out


def test_results_layout(quick_run):
    top = {p.name for p in quick_run.iterdir()}
    assert {"manifest.json", "comparison.json", "comparison.md", "jct_cdf.png", "energy_by_policy.png",
            "scenario.yaml", "traces.parquet", *POLICIES} <= top
    for p in POLICIES:
        files = {f.name for f in (quick_run / p).iterdir()}
        assert {"summary.json", "migrations.parquet", "timeseries.parquet", "decisions.parquet", "jobs.parquet",
                "energy_mix.png"} <= files
        summary = json.loads((quick_run / p / "summary.json").read_text())
        assert SUMMARY_KEYS <= set(summary)
        assert (quick_run / p / "energy_mix.png").stat().st_size > 20_000


def test_manifest_records_inputs_code_and_scales(quick_run):
    m = json.loads((quick_run / "manifest.json").read_text())
    assert len(m["scenario"]["sha256"]) == 64 and m["seed"] == 10
    assert m["substrate"]["substrate"] == "sim" and m["substrate"]["byte_scale"] == 1.0
    assert "transfer_s" in m["substrate"]["modelled"]
    assert set(m["wall_time_s"]) == set(POLICIES)
    assert m["versions"]["numpy"] and "commit" in m["git"]
    assert (quick_run / "scenario.yaml").read_text() == (ROOT / "scenarios" / "quickstart.yaml").read_text()


def test_comparison_shows_all_policies_and_no_paper_claims_for_a_user_scenario(quick_run):
    # quickstart (3 sites, 48 h) does not reproduce the paper's setup: its claims are not judged on it
    md = (quick_run / "comparison.md").read_text()
    for p in POLICIES:
        assert f"| {p} |" in md
    assert "-52 %" not in md and "reproduced" not in md and "does not reproduce the paper's setup (3 sites" in md
    cmp = json.loads((quick_run / "comparison.json").read_text())
    assert cmp["reference_policy"] == "static" and cmp["claims"] == []
    assert cmp["paper_setup"] == {"matches": False, "reason": "3 sites (the paper's setup has 5)"}


def test_same_seed_bit_identical_summaries(quick_run, tmp_path):
    out = tmp_path / "q2"
    assert main(["run", QUICK, "--out", str(out), "--no-progress"]) == 0
    for p in POLICIES:
        assert (out / p / "summary.json").read_bytes() == (quick_run / p / "summary.json").read_bytes()


def test_other_seed_other_traces(quick_run, tmp_path):
    out = tmp_path / "q3"
    assert main(["run", QUICK, "--out", str(out), "--seed", "8", "--no-progress"]) == 0
    a = pd.read_parquet(quick_run / "traces.parquet")
    b = pd.read_parquet(out / "traces.parquet")
    assert not a.equals(b)
    assert json.loads((out / "manifest.json").read_text())["seed"] == 8


def test_refuses_to_overwrite_without_force(quick_run, capsys):
    before = (quick_run / "manifest.json").read_bytes()
    assert main(["run", QUICK, "--out", str(quick_run), "--no-progress"]) == 2
    assert "--out" in capsys.readouterr().err
    assert (quick_run / "manifest.json").read_bytes() == before


def test_failed_run_leaves_nothing(tmp_path, monkeypatch):
    from testbed.controller import controller

    def boom(self):
        raise RuntimeError("simulated crash")

    monkeypatch.setattr(controller.Controller, "run", boom)
    with pytest.raises(RuntimeError):
        main(["run", QUICK, "--out", str(tmp_path / "crash"), "--no-progress"])
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("args", "flag"), [(["--substrate", "quantum"], "testbed run: argument --substrate"),
                                            (["--seed", "-1"], "--seed"),
                                            (["--seed", "x"], "--seed")])
def test_bad_run_flags(tmp_path, capsys, args, flag):
    assert main(["run", QUICK, "--out", str(tmp_path / "r"), *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {flag}")
    assert not (tmp_path / "r").exists()
