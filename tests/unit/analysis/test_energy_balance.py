"""Totals that add up (#30): every output table of a run gives the energy summary.json gives, battery
and curtailment included, and the energy plots draw what the tables say.

Sim runs of scenarios with batteries, curtailment and carbon / price signals (scenarios/carbon-price.yaml:
a battery at rome, curtailment windows, carbon_aware policies with and without a price cap; a small one
with a battery at one site of two and carbon moves), checked file by file: the timeseries' sums,
energy_by_site.csv (every site row and the total), summary.json, comparison.json and comparison.md,
and the data energy_mix.png and energy_by_policy.png are drawn from (the functions that prepare it).
Moves made on a grid signal (no renewable window) are counted apart, never as overran.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import testbed
from testbed.analysis.plots import MIX_DRAWN, MIX_UNUSED, energy_by_policy_data, energy_mix, energy_mix_data
from testbed.analysis.summary import (BATTERY_COLUMNS, ENERGY_TOTALS, SIGNAL_COLUMNS, WINDOW, energy_by_site,
                                      summarize)
from testbed.controller import records
from tests.conftest import ROOT, small_scenario_dict

CARBON_PRICE = ROOT / "scenarios" / "carbon-price.yaml"
CSV_TOL = 2e-6  # energy_by_site.csv is written with 6 decimals
KEYS = tuple(ENERGY_TOTALS) + BATTERY_COLUMNS  # the energy every table carries (battery: where there is one)


def _small_battery_scenario() -> dict:
    """Two sites, a battery at a only, curtailment windows, carbon and price traces, a carbon_aware
    policy (carbon moves) beside static."""
    d = small_scenario_dict(duration_h=36)
    d["traces"]["renewable"] = {"default": {"kind": "curtailment_windows", "capacity_kw": 2.0, "windows_per_day": 2,
                                            "mean_window_h": 3}}
    d["traces"]["carbon"] = {"sites": {"a": {"kind": "daily", "mean": 600, "amplitude_frac": 0.2},
                                       "b": {"kind": "daily", "mean": 80, "amplitude_frac": 0.2}}}
    d["traces"]["price"] = {"sites": {"default": {"kind": "daily", "mean": 0.2, "amplitude_frac": 0.4}}}
    d["batteries"] = {"a": {"capacity_kwh": 3.0, "charge_kw": 1.0, "discharge_kw": 0.8, "round_trip_efficiency": 0.9}}
    d["workloads"] = {"jobs": [{"id": f"j{i}", "checkpoint_gb": 20, "work_gpu_h": 8, "arrival_h": i, "origin": "a"}
                               for i in range(3)]}
    d["policies"] = ["static", {"name": "carbon_aware", "min_dwell_h": 0, "max_price_per_kwh": 0.22}]
    return d


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> list[Path]:
    base = tmp_path_factory.mktemp("balance")
    small = base / "small.json"
    small.write_text(json.dumps(_small_battery_scenario()), encoding="utf-8")
    return [testbed.run(src, substrate="sim", out=base / name, progress=False, plots=False).path
            for name, src in (("carbon-price", CARBON_PRICE), ("small", small))]


def _policies(run: Path) -> list[Path]:
    return sorted(p for p in run.iterdir() if (p / "summary.json").is_file())


def _summary(folder: Path) -> dict:
    return json.loads((folder / "summary.json").read_text(encoding="utf-8"))


def test_the_runs_have_batteries_curtailment_and_carbon_moves(runs):
    for run in runs:
        summaries = [_summary(p) for p in _policies(run)]
        assert all(s["battery_discharge_kwh"] > 0 and s["curtailed_kwh"] > 0 for s in summaries), run
        assert any(s["migrations_without_window"] > 0 for s in summaries), run
        ts = pd.read_parquet(_policies(run)[0] / "timeseries.parquet")
        assert ts["battery_soc_kwh"].isna().any()  # a site without a battery: the NaN-aware case


@pytest.mark.parametrize("which", [0, 1])
def test_every_table_gives_the_summarys_energy(runs, which):
    run = runs[which]
    cmp = json.loads((run / "comparison.json").read_text(encoding="utf-8"))
    for folder in _policies(run):
        s = _summary(folder)
        ts = pd.read_parquet(folder / "timeseries.parquet")
        # the timeseries' sums, NaN-aware
        for key, column in {**ENERGY_TOTALS, **{c: c for c in BATTERY_COLUMNS + SIGNAL_COLUMNS}}.items():
            assert s[key] == pytest.approx(float(ts[column].sum(skipna=True)), abs=1e-9), (folder.name, key)
        # energy_by_site.csv: the total row is the summary's, and the site rows add up to it
        by_site = pd.read_csv(folder / "energy_by_site.csv")
        assert set(KEYS + SIGNAL_COLUMNS) <= set(by_site.columns)
        total = by_site[by_site["site"] == "total"].iloc[0]
        sites = by_site[by_site["site"] != "total"]
        assert sorted(sites["site"]) == sorted(ts["site"].unique())
        for key in KEYS + SIGNAL_COLUMNS:
            assert total[key] == pytest.approx(s[key], abs=CSV_TOL), (folder.name, key)
            assert sites[key].sum(skipna=True) == pytest.approx(total[key], abs=CSV_TOL * len(sites)), (folder.name, key)
            per_site = ts.groupby("site")[ENERGY_TOTALS.get(key, key)].sum()
            assert np.allclose(sites.set_index("site")[key].fillna(0).sort_index(), per_site.sort_index(), atol=CSV_TOL)
        assert not sites[list(KEYS)].isna().any().any()  # a site without a battery: 0, never a gap
        # every row closes: drawn = renewable + battery + grid; available = used + stored + curtailed
        for _, r in by_site.iterrows():
            assert r["total_kwh"] == pytest.approx(r["renewable_kwh"] + r["battery_discharge_kwh"] + r["grid_kwh"],
                                                   abs=3 * CSV_TOL)
            assert r["renewable_available_kwh"] == pytest.approx(
                r["renewable_kwh"] + r["battery_charge_kwh"] + r["curtailed_kwh"], abs=3 * CSV_TOL)
            for part in ("compute", "transfer", "idle"):
                assert r[f"{part}_kwh"] == pytest.approx(r[f"{part}_renewable_kwh"] + r[f"{part}_grid_kwh"],
                                                         abs=3 * CSV_TOL)
        # the same function on the recorded tables gives the same, and the summary is recomputed exactly
        assert np.allclose(energy_by_site(ts)[list(KEYS)].to_numpy(float), by_site[list(KEYS)].to_numpy(float),
                           atol=CSV_TOL)
        tables = {n: pd.read_parquet(folder / f"{n}.parquet") for n in ("timeseries", "jobs", "migrations")}
        again = summarize(tables, policy=s["policy"], label=s["label"])
        assert {k: again[k] for k in KEYS} == pytest.approx({k: s[k] for k in KEYS}, abs=1e-9)
        # comparison.json carries the summary
        row = cmp["policies"][folder.name]
        assert {k: row[k] for k in KEYS} == pytest.approx({k: s[k] for k in KEYS}, abs=1e-12)
    _check_comparison_md(run)


def _check_comparison_md(run: Path) -> None:
    """comparison.md's energy columns, battery and curtailment included, are the summaries' (rounded)."""
    lines = (run / "comparison.md").read_text(encoding="utf-8").splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("| policy |"))
    columns = [c.strip() for c in lines[head].strip("|").split("|")]
    rows = {}
    for line in lines[head + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0]] = dict(zip(columns, cells))
    shown = {"grid kWh": "grid_kwh", "renewable kWh": "renewable_kwh", "battery kWh": "battery_discharge_kwh",
             "curtailed kWh": "curtailed_kwh", "overran budget": "migrations_overran",
             "no window": "migrations_without_window"}
    assert set(shown) <= set(columns), columns
    for folder in _policies(run):
        s = _summary(folder)
        for head_, key in shown.items():
            assert float(rows[folder.name][head_]) == pytest.approx(s[key], abs=0.051), (folder.name, head_)


@pytest.mark.parametrize("which", [0, 1])
def test_the_energy_plotted_is_the_tables(runs, which, tmp_path):
    run = runs[which]
    summaries = {}
    for folder in _policies(run):
        s = summaries[folder.name] = _summary(folder)
        ts = pd.read_parquet(folder / "timeseries.parquet")
        by_site = pd.read_csv(folder / "energy_by_site.csv").set_index("site")
        data = energy_mix_data(ts)
        kwh = data.drop(columns=["t_s", "dt_s"]).set_index("site").mul(data["dt_s"].to_numpy() / 3600.0, axis=0)
        drawn = kwh.groupby(level=0).sum()
        table = {"renewable_used_kw": "renewable_kwh", "battery_discharge_kw": "battery_discharge_kwh",
                 "grid_kw": "grid_kwh", "battery_charge_kw": "battery_charge_kwh", "curtailed_kw": "curtailed_kwh",
                 "demand_kw": "total_kwh", "renewable_available_kw": "renewable_available_kwh"}
        assert set(table) == {c for c, _, _ in MIX_DRAWN + MIX_UNUSED} | {"demand_kw", "renewable_available_kw"}
        for kw, key in table.items():
            for site, value in drawn[kw].items():
                assert value == pytest.approx(by_site.loc[site, key], abs=CSV_TOL), (folder.name, site, kw)
            assert drawn[kw].sum() == pytest.approx(s[key], abs=1e-9), (folder.name, kw)
        # per step, the stack reaches the demand and renewable used + not used the renewable available
        stack = data[[c for c, _, _ in MIX_DRAWN]].sum(axis=1)
        assert np.allclose(stack, data["demand_kw"], atol=1e-9)
        assert np.allclose(data["renewable_used_kw"] + data[[c for c, _, _ in MIX_UNUSED]].sum(axis=1),
                           data["renewable_available_kw"], atol=1e-9)
        # the stack is what the user saw missing: at a step where the battery delivers, drawn > renewable + grid
        if s["battery_discharge_kwh"] > 0:
            assert (stack > data["renewable_used_kw"] + data["grid_kw"] + 1e-6).any()
    bars = energy_by_policy_data(summaries).set_index("label")
    for label, s in summaries.items():
        for key in ("renewable_kwh", "battery_discharge_kwh", "grid_kwh", "battery_charge_kwh", "curtailed_kwh",
                    "total_kwh"):
            assert bars.loc[label, key] == pytest.approx(s[key], abs=1e-12)
        assert bars.loc[label, ["renewable_kwh", "battery_discharge_kwh", "grid_kwh"]].sum() == pytest.approx(
            s["total_kwh"], abs=1e-9)
    folder = _policies(run)[0]  # and the figure is drawn from it
    out = energy_mix(pd.read_parquet(folder / "timeseries.parquet"), pd.read_parquet(folder / "migrations.parquet"),
                     tmp_path / "energy_mix.png", "test")
    assert Path(out).stat().st_size > 0


def test_moves_without_a_window_are_counted_apart(runs):
    assert records.WINDOW == WINDOW
    seen = 0
    for run in runs:
        for folder in _policies(run):
            s = _summary(folder)
            m = pd.read_parquet(folder / "migrations.parquet")
            assert set(m["trigger"]) <= set(records.TRIGGERS)
            window = m["trigger"] == WINDOW
            finished = m["status"] != "unfinished"
            assert s["migrations_without_window"] == int((~window).sum())
            assert s["migrations_overran"] == int((window & finished & m["overran"].fillna(False).astype(bool)).sum())
            assert s["migrations_outside_window"] == int(
                (window & finished & ~m["completed_in_window"].fillna(True).astype(bool)).sum())
            grid = m[~window]
            # no budget: no verdict (overran means: had a window budget and overran it)
            assert grid["overran"].isna().all() and grid["within_budget"].isna().all()
            assert grid["completed_in_window"].isna().all()
            assert m.loc[window & finished, "overran"].notna().all()
            assert grid["reason"].str.contains("grid").all() and set(grid["trigger"]) <= {"carbon", "price"}
            seen += len(grid)
    assert seen > 0
    cp = _summary(runs[0] / "carbon_aware_price")
    # the user's run: 8 of 13 "overran", 7 of them carbon moves; now 1 overran, 7 without a window
    assert cp["migrations"] == cp["migrations_without_window"] + int(
        (pd.read_parquet(runs[0] / "carbon_aware_price" / "migrations.parquet")["trigger"] == WINDOW).sum())
    assert cp["migrations_overran"] <= cp["migrations"] - cp["migrations_without_window"]


def test_site_rows_without_battery_values_still_add_up():
    """Tables written with NaN battery columns at a site without a battery (or a step without a value)
    sum NaN-aware: the total row and the summary agree, and curtailment is never lost."""
    steps = pd.DataFrame({
        "t_s": [0.0, 0.0, 300.0, 300.0], "dt_s": 300.0, "site": ["a", "b", "a", "b"],
        "demand_kwh": [1.0, 2.0, 1.0, 2.0], "renewable_used_kwh": [0.5, 1.0, 0.5, 0.0],
        "battery_discharge_kwh": [0.25, np.nan, 0.0, np.nan], "battery_charge_kwh": [0.0, np.nan, 0.5, np.nan],
        "battery_loss_kwh": [0.0, np.nan, 0.05, np.nan], "battery_soc_kwh": [1.0, np.nan, 1.45, np.nan],
        "curtailed_kwh": [0.0, 3.0, 0.1, np.nan], "renewable_available_kwh": [0.5, 4.0, 1.1, 0.0],
        **{c: [0.0] * 4 for c in ("compute_kwh", "transfer_kwh", "idle_kwh", "compute_renewable_kwh",
                                  "transfer_renewable_kwh", "idle_renewable_kwh", "overdraw_kwh")},
    })
    steps["grid_kwh"] = steps["demand_kwh"] - steps["renewable_used_kwh"] - steps["battery_discharge_kwh"].fillna(0)
    by_site = energy_by_site(steps).set_index("site")
    assert by_site.loc["total", "curtailed_kwh"] == pytest.approx(3.1)
    assert by_site.loc["b", "battery_discharge_kwh"] == 0.0 and by_site.loc["b", "curtailed_kwh"] == 3.0
    for key in KEYS:
        assert by_site.loc["total", key] == pytest.approx(by_site.drop("total")[key].sum())
    data = energy_mix_data(steps)
    assert not data.isna().any().any()
    assert (data["curtailed_kw"] * 300 / 3600).sum() == pytest.approx(3.1)
