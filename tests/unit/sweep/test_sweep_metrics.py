"""A sweep's ``metrics:`` are checked against the base scenario's study before any trial runs: a
misspelt or renamed name fails at plan time (exit 2, the field named, nothing created); a real one plans."""

from __future__ import annotations

import pytest

import testbed
from testbed.cli import main
from testbed.errors import SpecError
from testbed.studies import FederatedStudy, MigrationStudy, summary_metrics_for
from testbed.sweep import load_sweep_file, plan_sweep
from tests.conftest import ROOT

MIGRATION = ROOT / "scenarios" / "quickstart.yaml"
FEDERATED = ROOT / "scenarios" / "powertrip-us100.yaml"


def _sweep(tmp_path, scenario, metrics: list[str]):
    path = tmp_path / "s.yaml"
    path.write_text(f"scenario: {scenario}\nseeds: [1]\ngrid:\n  duration_h: [24, 48]\nmetrics: [{', '.join(metrics)}]\n",
                    encoding="utf-8")
    return path


@pytest.fixture()
def no_trials(monkeypatch):
    """A trial that starts fails the test: the check must come before."""
    def refuse(*a, **k):
        raise AssertionError("a trial ran")

    monkeypatch.setattr("testbed.sweep.api.run_sweep", refuse)


def test_the_study_of_the_scenario_says_its_columns():
    assert summary_metrics_for(testbed.load(MIGRATION)) == MigrationStudy.summary_metrics()
    assert summary_metrics_for(testbed.load(FEDERATED)) == FederatedStudy.summary_metrics()
    assert "grid_kwh" in MigrationStudy.summary_metrics() and "time_to_accuracy_s" in FederatedStudy.summary_metrics()
    assert "time_to_accuracy_s" not in MigrationStudy.summary_metrics()


def test_a_misspelt_metric_fails_at_plan_time_from_the_cli(tmp_path, capsys, no_trials):
    path = _sweep(tmp_path, MIGRATION, ["grid_kwh", "grid_kwhh"])
    out = tmp_path / "out"
    assert main(["sweep", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        f"error: {path}: metrics[1]: no summary column 'grid_kwhh' (did you mean grid_kwh") and "(known: " in err[0]
    assert not out.exists()


def test_a_renamed_metric_fails_at_plan_time_from_python(tmp_path, no_trials):
    path = _sweep(tmp_path, MIGRATION, ["non_renewable_kwh", "mean_jct_h", "time_to_accuracy_s"])
    out = tmp_path / "out"
    with pytest.raises(SpecError) as e:
        testbed.sweep(path, out)
    assert e.value.lines()[0] == f"{path}: metrics[0]: 'non_renewable_kwh' is now called 'grid_kwh'"
    assert e.value.lines()[1] == f"{path}: metrics[1]: 'mean_jct_h' is now called 'mean_jct_s', in its unit (x 3600)"
    assert e.value.lines()[2].startswith(f"{path}: metrics[2]: no summary column 'time_to_accuracy_s' (")  # federated's
    assert len(e.value.lines()) == 3 and not out.exists()


def test_metric_problems_come_with_the_cells_problems(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(f"scenario: {MIGRATION}\nseeds: [1]\ngrid:\n  feasibility.alpha: [0.1, 2]\nmetrics: [grid_kw]\n",
                    encoding="utf-8")
    with pytest.raises(SpecError) as e:
        plan_sweep(load_sweep_file(path))
    lines = e.value.lines()
    assert lines[0].startswith(f"{path}: metrics[0]: no summary column 'grid_kw' (did you mean grid_kwh")
    assert lines[1] == f"{path}: cell 001-alpha=2: feasibility.alpha: must be <= 1.0 (got 2)"


def test_federated_names_are_checked_against_the_federated_study(tmp_path):
    bad = _sweep(tmp_path, FEDERATED, ["time_to_accuracy_s", "energy_grid_kwh", "mean_jct_s"])
    with pytest.raises(SpecError) as e:
        plan_sweep(load_sweep_file(bad))
    assert e.value.lines()[0] == f"{bad}: metrics[1]: 'energy_grid_kwh' is now called 'grid_kwh'"
    assert e.value.lines()[1].startswith(f"{bad}: metrics[2]: no summary column 'mean_jct_s'")
    good = _sweep(tmp_path, FEDERATED, ["time_to_accuracy_s", "grid_kwh", "k", "co2_kg"])
    assert len(plan_sweep(load_sweep_file(good)).trials) == 2


def test_real_names_plan(tmp_path):
    plan = plan_sweep(load_sweep_file(_sweep(tmp_path, MIGRATION, ["grid_kwh", "mean_jct_s", "battery_charge_kwh"])))
    assert len(plan.trials) == 2


def test_an_optional_metric_the_runs_lack_comes_out_nan(tmp_path, capsys):
    """``co2_kg`` needs a carbon trace: a study without one still gets its table, with NaN there
    (before, every trial ran and then the sweep exited 2 with no table)."""
    import math

    import pandas as pd

    from tests.unit.sweep_support import write_sweep

    path = write_sweep(tmp_path / "s", {"seeds": [1], "grid": {"feasibility.alpha": [0.1, 0.2]},
                                        "metrics": ["grid_kwh", "co2_kg", "battery_charge_kwh"]})
    out = tmp_path / "out"
    assert main(["sweep", str(path), "--out", str(out), "--parallel", "1"]) == 0, capsys.readouterr().err
    table = pd.read_csv(out / "table.csv")
    assert list(table["metric"].unique()) == ["grid_kwh", "co2_kg", "battery_charge_kwh"]
    co2 = table[table["metric"] == "co2_kg"]
    assert len(co2) == 4 and (co2["n"] == 0).all() and co2["mean"].isna().all()
    assert (table[table["metric"] == "grid_kwh"]["n"] == 1).all()
    results = pd.read_parquet(out / "results.parquet")
    assert results["co2_kg"].isna().all() and not any(math.isnan(x) for x in results["grid_kwh"])


def test_optional_names_pass_only_when_the_study_declares_them():
    from testbed.sweep.metrics import metric_problems

    numeric = {"grid_kwh": True}
    assert metric_problems(["grid_kwh", "co2_kg"], numeric, "s.yaml", optional=("grid_kwh", "co2_kg")) == []
    [(where, msg)] = metric_problems(["grid_kwh", "co2_kg"], numeric, "s.yaml")
    assert where == "s.yaml: metrics[1]" and msg.startswith("no summary column 'co2_kg'")
