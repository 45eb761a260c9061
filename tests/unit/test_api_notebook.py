"""A researcher's notebook (issue #30), from Python only: a scenario built as a dict, swept over two
alphas x ten seeds by the sweep engine, the sweep opened as tidy DataFrames (run_id, cell, seed,
policy, label on every table), one policy's time series picked out and plotted. No file is
written by hand."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pandas as pd
import pytest

import testbed
from testbed.errors import SpecError

REPO = Path(__file__).resolve().parents[2]
ALPHA = "policies[feasibility_aware].alpha"

SCENARIO = {
    "name": "notebook",
    "seed": 1,
    "duration_h": 12,
    "step_s": 600,
    "sites": [{"name": "rome", "lat_deg": 41.9, "lon_deg": 12.5, "nodes": 2},
              {"name": "paris", "lat_deg": 48.9, "lon_deg": 2.4, "nodes": 2}],
    "links": [{"a": "rome", "b": "paris", "bandwidth_gbps": 5}],
    "traces": {"renewable": {"default": {"kind": "curtailment_windows", "capacity_kw": 1.5, "windows_per_day": 3}}},
    "workloads": {"jobs": [{"checkpoint_gb": 24, "work_gpu_h": 4, "origin": "rome"},
                           {"checkpoint_gb": 40, "work_gpu_h": 6, "arrival_h": 1, "origin": "paris"}]},
    "policies": ["energy_only", "feasibility_aware"],
}


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    out = tmp_path_factory.mktemp("notebook") / "alpha-sweep"
    private = tmp_path_factory.mktemp("tmp")  # this sweep's temporary files only (other workers make their own)
    saved, tempfile.tempdir = tempfile.tempdir, str(private)
    try:
        table = testbed.sweep(SCENARIO, grid={ALPHA: [0.05, 0.2]}, seeds=range(10), parallel=2, out=out)
    finally:
        tempfile.tempdir = saved
    assert not list(private.glob("testbed-sweep-input-*"))  # the sweep and scenario files the engine read are gone
    return table, out


def test_the_sweep_ran_every_trial_through_the_engine(swept):
    table, out = swept
    assert table.attrs["failed"] == [] and Path(table.attrs["path"]) == out.resolve()
    assert table.equals(pd.read_csv(out / "table.csv"))
    assert set(table["policy"]) == {"energy_only", "feasibility_aware"}
    assert (table.loc[table["metric"] == "grid_kwh", "n"] == 10).all()
    trials = sorted(p.relative_to(out / "trials").as_posix() for p in (out / "trials").glob("*/seed-*"))
    assert len(trials) == 20 and all((out / "trials" / t / "manifest.json").is_file() for t in trials)
    assert "given to testbed.sweep from Python" in (out / "sweep.yaml").read_text()


def test_open_gives_tidy_tables_over_every_trial(swept):
    _, out = swept
    sw = testbed.open(out)
    assert type(sw).__name__ == "SweepResults" and type(testbed.open_results(out)) is type(sw)
    [param] = sw.param_columns
    keys = ["run_id", "cell", param, "seed", "policy", "label"]
    assert {"migrations", "jobs", "timeseries", "decisions", "power"} <= set(sw.tables)
    for name in ["summary", *sw.tables]:
        df = sw.summary if name == "summary" else sw.table(name)
        assert list(df.columns[:6]) == keys, name
        assert len(df) and df[keys].notna().all().all(), name
    summary = sw.summary
    assert len(summary) == 20 * 2 and summary["run_id"].nunique() == 20
    assert set(summary["seed"]) == set(range(10)) and set(summary[param]) == {0.05, 0.2}
    assert (summary.groupby("cell")[param].nunique() == 1).all()  # each cell's parameter, on its rows
    assert set(sw.trials["status"]) == {"completed"} and len(sw.runs) == 20
    # the sweep's own frames: results.parquet (with run_id) and table.csv
    assert list(sw.results["run_id"]) == [f"{c}/seed-{s}" for c, s in zip(sw.results["cell"], sw.results["seed"])]
    assert sw.stats.equals(pd.read_csv(out / "table.csv"))
    # rows are the trials' own: one trial's jobs equal its run directory's
    run_id = summary["run_id"].iloc[-1]
    own = testbed.open(out / "trials" / run_id).jobs.drop(columns=["run_id", "seed"])  # a run's own keys
    mine = sw.jobs[sw.jobs["run_id"] == run_id].drop(columns=keys[:4]).reset_index(drop=True)
    pd.testing.assert_frame_equal(mine, own)


def test_one_policys_time_series_is_selected_and_plotted(swept):
    import matplotlib

    matplotlib.use("Agg")
    _, out = swept
    sw = testbed.open(out)
    [param] = sw.param_columns
    ts = sw.timeseries
    one = ts[(ts["policy"] == "feasibility_aware") & (ts[param] == 0.2) & (ts["seed"] == 3)]
    assert one["run_id"].nunique() == 1 and set(one["label"]) == {"feasibility_aware"}
    [run_id] = set(one["run_id"])
    own = pd.read_parquet(out / "trials" / run_id / "feasibility_aware" / "timeseries.parquet")
    assert len(one) == len(own) and one["t_s"].tolist() == own["t_s"].tolist()
    rome = one[one["site"] == "rome"]
    ax = rome.plot(x="t_s", y="renewable_available_kw")
    assert len(ax.get_lines()) == 1 and len(ax.get_lines()[0].get_xdata()) == len(rome)


def test_a_sweep_given_as_data_mirrors_the_sweep_file(tmp_path):
    table = testbed.sweep({"scenario": "scenarios/sweep-small.yaml", "grid": {"duration_h": [12]},
                           "metrics": ["grid_kwh"]}, tmp_path / "s", seeds=[4], base=REPO, parallel=1)
    assert table.attrs["failed"] == [] and set(table["metric"]) == {"grid_kwh"}
    sw = testbed.open(tmp_path / "s")
    assert set(sw.summary["seed"]) == {4} and sw.param_columns == ["param_duration_h"] and sw.param_paths == {"param_duration_h": "duration_h"}
    assert sw.manifest["scenario"]["path"] == str(REPO / "scenarios" / "sweep-small.yaml")  # the file itself
    assert sw.manifest["sweep"]["name"] == "sweep-small"


def test_a_sweep_file_with_fields_replaced_from_python(tmp_path):
    table = testbed.sweep(REPO / "sweeps" / "example-2x2x3.yaml", tmp_path / "s", grid={"duration_h": [12]},
                          seeds=[0], parallel=1)
    assert table.attrs["failed"] == [] and set(table["param_duration_h"]) == {12}
    assert "grid_kwh" in set(table["metric"]) and "jobs_completed" in set(table["metric"])  # the file's metrics
    assert testbed.open(tmp_path / "s").manifest["sweep"]["name"] == "example-2x2x3"


def test_sweep_errors_name_the_field_not_a_temporary_file():
    left = {p.name for p in Path(tempfile.gettempdir()).glob("testbed-sweep-notebook-*")}
    with pytest.raises(SpecError) as e:
        testbed.sweep(SCENARIO, grid={"policies[feasibility_awar].alpha": [0.1]}, seeds=2)
    [(where, msg)] = e.value.problems
    assert where == "sweep: grid[policies[feasibility_awar].alpha]" and "did you mean feasibility_aware?" in msg
    with pytest.raises(SpecError) as e:
        testbed.sweep(SCENARIO, grid={"duration_h": []})
    assert e.value.problems == [("sweep: grid[duration_h]", "must list at least one value")]
    with pytest.raises(SpecError, match=r"sweep: grid\[duration_h\]\[0\]: a value of type object is not plain"):
        testbed.sweep(SCENARIO, grid={"duration_h": [object()]})
    with pytest.raises(SpecError) as e:
        testbed.sweep({**SCENARIO, "duration_h": -1}, grid={"duration_h": [6]})
    assert [w for w, _ in e.value.problems] == ["duration_h"]  # the dict's own field
    assert {p.name for p in Path(tempfile.gettempdir()).glob("testbed-sweep-notebook-*")} == left  # out=None: removed


def test_grid_values_from_numpy_are_plain_data():
    np = pytest.importorskip("numpy")
    from testbed.sweep_from_python import _plain

    got = _plain({"grid": {ALPHA: np.array([0.05, 0.2]), "duration_h": [np.int64(12)]}, "seeds": range(3)}, "")
    assert got == {"grid": {ALPHA: [0.05, 0.2], "duration_h": [12]}, "seeds": [0, 1, 2]}
    assert type(got["grid"]["duration_h"][0]) is int
