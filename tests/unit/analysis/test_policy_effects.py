"""The report's availability, filter and class-rule sections: hand-made inputs, hand-computed outputs."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from testbed.analysis import policy_effects as pe
from testbed.analysis.validation import Run

CAP = "param_traces_renewable_default_capacity_kw"


def _sums():
    rows = []
    for level, static, bound, fa in ((3.0, [100.0, 110.0, 90.0], [80.0, 88.0, 72.0], [90.0, 99.0, 81.0]),
                                     (12.0, [50.0, 40.0, 60.0], [20.0, 16.0, 24.0], [35.0, 28.0, 42.0])):
        for seed, (s, b, f) in enumerate(zip(static, bound, fa)):
            cell = f"00{int(level)}-capacity_kw={level}"
            rows.append({"substrate": "sim", "cell": cell, "seed": seed, CAP: level, "policy": "static",
                         "label": "static", "grid_kwh": s, "pooled_bound_grid_kwh": b})
            rows.append({"substrate": "sim", "cell": cell, "seed": seed, CAP: level, "policy": "feasibility_aware",
                         "label": "feasibility_aware", "grid_kwh": f, "pooled_bound_grid_kwh": 0.0})
    return pd.DataFrame(rows)


def test_availability_table_by_hand(tmp_path):
    sums = _sums()
    assert pe.capacity_param(sums) == CAP
    t = pe.availability_table(sums, CAP).set_index("renewable capacity (kW per site)")
    # level 3: bound is 80 % of static in every seed -> placement can save 20 %; fa saves 10 %
    assert t.loc[3.0, "most placement can save vs static (%)"].startswith("-20.0 [-20.0, -20.0]")
    assert t.loc[3.0, "feasibility_aware vs static (%)"].startswith("-10.0")
    assert t.loc[3.0, "paper's -52 % attainable"] == "no"
    # level 12: the bound is 40 % of static -> 60 % can be saved: the paper's 52 % is attainable
    assert t.loc[12.0, "most placement can save vs static (%)"].startswith("-60.0")
    assert t.loc[12.0, "feasibility_aware vs static (%)"].startswith("-30.0")
    assert t.loc[12.0, "paper's -52 % attainable"] == "yes"
    pe.availability_plot(sums, CAP, tmp_path / "a.png")
    assert (tmp_path / "a.png").stat().st_size > 10_000
    assert pe.capacity_param(sums.assign(**{CAP: 3.0})) is None  # not swept: no section


def _comps(runs):
    """Each run's comparison.json (what testbed.analysis.report_data.comparisons gives the report)."""
    return [json.loads((r.path / "comparison.json").read_text()) for r in runs]


def _run(tmp_path, seed, policies):
    d = tmp_path / f"run{seed}"
    d.mkdir()
    (d / "comparison.json").write_text(json.dumps({"policies": policies}))
    return Run(path=d, substrate="sim", seed=seed, scenario="s", cell="000", params={}, resolved={})


def test_paired_split_of_the_filter_and_the_class_rule(tmp_path):
    runs = []
    g = np.random.default_rng(0)
    for seed in range(10):
        eo = {"grid_kwh": 100.0 + seed, "mean_jct_s": 20.0 * 3600, "migrations_overran": 5, "migrations": 30}
        fa = {"grid_kwh": 102.0 + seed + g.normal(0, 0.1), "mean_jct_s": 19.0 * 3600, "migrations_overran": 1,
              "migrations": 20}
        cl = {"grid_kwh": fa["grid_kwh"], "mean_jct_s": 19.0 * 3600, "migrations_overran": 3, "migrations": 18}
        runs.append(_run(tmp_path, seed, {
            "static": {"policy": "static"}, "energy_only": {"policy": "energy_only", **eo},
            "feasibility_aware": {"policy": "feasibility_aware", **fa},
            "classes-paper": {"policy": "feasibility_classes", **cl}}))
    filt = pe.paired_split(runs, _comps(runs), "feasibility_aware", "energy_only")
    assert len(filt) == 1 and filt.loc[0, "against"] == "energy_only" and filt.loc[0, "seeds"] == 10
    assert filt.loc[0, "grid kWh diff"].startswith("+2.0")
    assert filt.loc[0, "overran diff"].startswith("-4.00") and filt.loc[0, "overran p"] == "0.002"  # 2 / 2**10, exact
    assert filt.loc[0, "mean JCT h diff"].startswith("-1.00")
    cls = pe.paired_split(runs, _comps(runs), "feasibility_classes", "feasibility_aware")
    assert list(cls["policy"]) == ["classes-paper"] and cls.loc[0, "against"] == "feasibility_aware"
    assert cls.loc[0, "overran diff"].startswith("+2.00") and cls.loc[0, "migrations diff"].startswith("-2.00")
    assert cls.loc[0, "grid kWh p"] == "-"  # every difference 0: no test to run
    md = "\n".join(pe.markdown(runs, _comps(runs), pd.DataFrame(), tmp_path))
    assert "## What the filter does" in md and "## Class rule vs Eq. 1" in md and "Renewable availability" not in md


def test_no_pair_no_section(tmp_path):
    runs = [_run(tmp_path, 0, {"static": {"policy": "static"}, "energy_only": {"policy": "energy_only",
                                                                                  "grid_kwh": 1.0}})]
    assert pe.paired_split(runs, _comps(runs), "feasibility_aware", "energy_only").empty
    assert pe.markdown(runs, _comps(runs), pd.DataFrame(), tmp_path) == []
