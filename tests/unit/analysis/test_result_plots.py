"""``r.plot`` / ``s.plot`` (issue #30): one policy's time series (not every policy on top of each
other), predicted vs realised migration time labelled measured or modelled by where the realised
value came from (a sim run's is modelled, never "actual"), a sweep's metric by a parameter with
95 % CIs over seeds (the sweep table's own numbers)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

import testbed
from testbed.analysis.outcomes import basis
from testbed.analysis.result_plots import metric_by_data, pred_vs_realised
from tests.conftest import ROOT
from tests.unit.sweep_support import tiny_scenario

FA = "feasibility_aware"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("plots") / "run"
    return testbed.run(ROOT / "scenarios" / "sweep-small.yaml", out=out, overrides={"duration_h": 12},
                       progress=False, plots=False)  # migrations in every migrating policy


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("plots") / "sweep"
    testbed.sweep(tiny_scenario(), out, grid={"traces.renewable.default.capacity_kw": [1.0, 3.0]}, seeds=range(3),
                  parallel=1, metrics=["grid_kwh"])
    return testbed.open(out)


def _texts(fig: Figure) -> list[str]:
    out = [fig.get_suptitle()] if fig.get_suptitle() else []
    for ax in fig.axes:
        out += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel(), *(t.get_text() for t in ax.texts)]
        if ax.get_legend() is not None:
            out += [t.get_text() for t in ax.get_legend().get_texts()]
    for leg in fig.legends:
        out += [t.get_text() for t in leg.get_texts()]
    return out


def test_timeseries_draws_one_policy_per_site(run):
    fig = run.plot.timeseries(policy=FA, column="grid_kw", migrations=False)
    assert isinstance(fig, Figure)
    ts = run.timeseries
    sites = list(dict.fromkeys(ts["site"]))
    assert len(fig.axes) == len(sites)
    for ax, site in zip(fig.axes, sites):
        [line] = ax.get_lines()  # one policy: one line, not one per policy
        mine = ts[(ts["label"] == FA) & (ts["site"] == site)]
        np.testing.assert_allclose(line.get_ydata(), mine["grid_kw"].to_numpy())
        np.testing.assert_allclose(line.get_xdata(), mine["t_s"].to_numpy() / 3600.0)
    two = run.plot.timeseries(FA, ["grid_kw", "renewable_available_kw"], migrations=False)
    assert all(len(ax.get_lines()) == 2 for ax in two.axes)


def test_timeseries_asks_for_a_policy_and_names_what_there_is(run):
    with pytest.raises(ValueError, match="several policies: give policy= one of static, energy_only, feasibility_aware, no_filter"):
        run.plot.timeseries()
    with pytest.raises(ValueError, match="did you mean feasibility_aware"):
        run.plot.timeseries("feasibility_awar")
    with pytest.raises(ValueError, match="no column 'grid_k' .*did you mean grid_kw"):
        run.plot.timeseries(FA, "grid_k")


def test_pred_vs_actual_on_sim_says_modelled_never_actual(run):
    m = run.migrations
    done = m[(m["status"] == "completed") & m["predicted_total_s"].notna()]
    assert len(done), "the scenario should migrate"
    fig = run.plot.pred_vs_actual()
    assert isinstance(fig, Figure)
    [ax] = fig.axes
    points = sum(len(c.get_offsets()) for c in ax.collections)
    assert points == len(done)
    texts = " | ".join(_texts(fig))
    assert "modelled" in texts and "measured" not in texts and "actual" not in texts.lower()
    assert "realised total (s), modelled" == ax.get_ylabel()


def test_a_measured_outcome_is_labelled_measured():
    m = pd.DataFrame({"label": ["x", "x", "y"], "status": ["completed"] * 3,
                      "predicted_transfer_s": [10.0, 20.0, 30.0],
                      "outcome_transfer_s": [12.0, 19.0, np.nan], "actual_transfer_s": [12.0, np.nan, np.nan],
                      "model_transfer_s": [np.nan, np.nan, 33.0]})
    assert basis(m, "transfer").tolist() == ["measured", "modelled", "modelled"]
    fig = pred_vs_realised(m, "t", what="transfer")
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels[:3] == ["x (measured, n=1)", "x (modelled, n=1)", "y (modelled, n=1)"]
    assert fig.axes[0].get_ylabel() == "realised transfer (s), measured or modelled"


def test_sweep_metric_by_parameter_is_the_sweep_tables_mean_and_ci(sweep):
    [param] = sweep.param_columns
    fig = sweep.plot.metric("grid_kwh")
    assert isinstance(fig, Figure) and fig.axes[0].get_xlabel() == param
    data = metric_by_data(sweep.summary, "grid_kwh", param)
    stats = sweep.stats[sweep.stats["metric"] == "grid_kwh"]
    assert len(data) == len(stats) == 4 and set(data["n"]) == {3}
    key = "label" if "label" in stats.columns else "policy"  # the table's policy entry
    for row in data.itertuples():
        [want] = stats[(stats[key] == row.label) & (stats[param] == getattr(row, param))].itertuples()
        assert (row.mean, row.ci95) == pytest.approx((want.mean, want.ci95))
    ax = fig.axes[0]
    assert len(ax.containers) == 2  # one errorbar series per policy
    for cont in ax.containers:
        assert len(cont.lines[0].get_ydata()) == 2  # one point per parameter value


def test_sweep_timeseries_selects_one_trial(sweep):
    [param] = sweep.param_columns
    fig = sweep.plot.timeseries(FA, seed=1, **{param: 3.0}, migrations=False)
    ts = sweep.timeseries
    mine = ts[(ts["label"] == FA) & (ts["seed"] == 1) & (ts[param] == 3.0)]
    assert sum(len(ax.get_lines()[0].get_ydata()) for ax in fig.axes) == len(mine)
    with pytest.raises(ValueError, match="2 trials match"):
        sweep.plot.timeseries(FA, seed=1)
    with pytest.raises(ValueError, match="not a parameter of this sweep"):
        sweep.plot.metric("grid_kwh", by="alpha")
    assert isinstance(sweep.plot.pred_vs_actual(policy=FA), Figure)
