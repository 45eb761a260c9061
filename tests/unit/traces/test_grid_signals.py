"""Carbon intensity and electricity price traces, their accounting, the carbon-aware policy, and batteries."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from testbed.analysis.summary import summarize
from testbed.cli import main
from testbed.controller.battery import Battery
from testbed.errors import SpecError
from testbed.inputs import build_inputs
from testbed.spec import scenario_from_dict
from testbed.traces.daily import daily_signal
from tests.conftest import ROOT, run_policies, small_scenario_dict

START = datetime(2024, 6, 3, tzinfo=timezone.utc)


def _signal(**kw):
    args = dict(duration_s=3 * 86400, step_s=300, start=START, utc_offset_h=0.0, mean=300.0, amplitude_frac=0.3,
                peak_h=19.0, noise_cv=0.0, corr_h=3.0, seed=1, unit="gCO2/kWh", name="c")
    return daily_signal(**{**args, **kw})


# ---------------------------------------------------------------------------- the daily generator


def test_daily_shape_peaks_at_the_local_hour_and_keeps_its_mean():
    tr = _signal(utc_offset_h=2.0)
    day = tr.values[:288]
    peak_local_h = (tr.times_s[int(np.argmax(day))] / 3600.0 + 2.0 + 300 / 7200) % 24
    assert abs(peak_local_h - 19.0) < 0.1
    assert day.max() == pytest.approx(300 * 1.3, rel=1e-3) and day.min() == pytest.approx(300 * 0.7, rel=1e-3)
    assert tr.values.mean() == pytest.approx(300.0, rel=1e-3)


def test_daily_noise_is_seeded_with_mean_one():
    a, b, c = _signal(noise_cv=0.2, seed=5), _signal(noise_cv=0.2, seed=5), _signal(noise_cv=0.2, seed=6)
    assert a == b and a != c
    long = _signal(noise_cv=0.2, amplitude_frac=0.0, corr_h=0.5, duration_s=200 * 86400)
    assert long.values.mean() == pytest.approx(300.0, rel=0.05)
    assert long.values.std() / long.values.mean() == pytest.approx(0.2, rel=0.15)
    assert (long.values >= 0).all()


# ---------------------------------------------------------------------------- spec and files


def _scenario(**traces):
    d = small_scenario_dict(duration_h=24)
    d["traces"].update(traces)
    return d


def test_signals_build_per_site_with_default_and_currency():
    d = _scenario(carbon={"sites": {"default": {"kind": "daily", "mean": 300}, "b": {"kind": "constant", "value": 40}}},
                  price={"currency": "USD", "sites": {"default": {"kind": "constant", "value": 0.2}}})
    inp = build_inputs(scenario_from_dict(d))
    assert set(inp.grid.carbon_g_per_kwh) == {"a", "b"} and inp.grid.currency == "USD"
    assert inp.grid.carbon_g_per_kwh["b"].at(3600.0) == 40.0
    assert inp.grid.carbon_g_per_kwh["a"].unit == "gCO2/kWh" and inp.grid.price_per_kwh["a"].unit == "currency/kWh"
    assert inp.grid.carbon_g_per_kwh["a"] != inp.grid.carbon_g_per_kwh["a"].scaled(1.01)


@pytest.mark.parametrize("traces, field", [
    ({"carbon": {"sites": {"a": {"kind": "constant", "value": 1}}}}, "traces.carbon.sites"),
    ({"carbon": {"sites": {"default": {"kind": "constant", "value": 1}, "zz": {"kind": "constant", "value": 1}}}},
     "traces.carbon.sites.zz"),
    ({"price": {"sites": {"default": {"kind": "csv", "file": "x.csv", "unit": "per_GWh"}}}}, "traces.price.sites.default.unit"),
    ({"price": {"sites": {"default": {"kind": "csv", "file": "nope.csv"}}}}, "traces.price.sites.default.file"),
    ({"carbon": {"sites": {"default": {"kind": "daily", "mean": -1}}}}, "traces.carbon.sites.default.mean"),
    ({"carbon": {"sites": {"default": {"kind": "hourly", "mean": 1}}}}, "traces.carbon.sites.default"),
    ({"price": {"currency": "E U R", "sites": {"default": {"kind": "constant", "value": 1}}}}, "traces.price.currency"),
])
def test_bad_signal_entries_name_the_field(traces, field):
    with pytest.raises(SpecError) as e:
        scenario_from_dict(_scenario(**traces))
    assert any(where == field for where, _ in e.value.problems), e.value.problems


def test_carbon_aware_needs_carbon_traces_and_a_price_cap_needs_prices():
    d = _scenario(carbon={"sites": {"default": {"kind": "constant", "value": 1}}})
    d["policies"] = ["static", {"name": "carbon_aware", "max_price_per_kwh": 0.3}]
    with pytest.raises(SpecError) as e:
        scenario_from_dict(d)
    assert ("policies[1].max_price_per_kwh", "needs price traces (traces.price)") in e.value.problems
    d["traces"].pop("carbon")
    d["policies"] = ["carbon_aware"]
    with pytest.raises(SpecError) as e:
        scenario_from_dict(d)
    assert [w for w, _ in e.value.problems] == ["policies[0]"]


SECRET = "hunter2-do-not-echo"


@pytest.mark.parametrize("body, needle", [
    ("time,value\n0,1\n", "missing column 'timestamp'"),
    (f"timestamp,value\n0,{SECRET}\n3600,2\n", "data row 1 is not a number"),
    ("timestamp,value\n0,100\n3600,-5\n", "carbon intensity must be >= 0"),
    ("timestamp,value\n0,100\n3600,5\n", "the data covers"),
])
def test_carbon_csv_problems_name_the_file_and_never_echo_it(tmp_path, body, needle):
    f = tmp_path / "carbon.csv"
    f.write_text(body.replace("3600,-5", "3600,-5\n" + "\n".join(f"{7200 + 3600 * i},5" for i in range(30))))
    d = _scenario(carbon={"sites": {"default": {"kind": "csv", "file": str(f)}}})
    with pytest.raises(SpecError) as e:
        build_inputs(scenario_from_dict(d))
    text = str(e.value)
    assert needle in text and "traces.carbon.sites.default.file" in text and str(f) in text
    assert SECRET not in text


def test_price_csv_in_per_mwh_with_iso_times_and_negative_prices(tmp_path):
    f = tmp_path / "price.csv"
    rows = ["time,eur_mwh"] + [f"2024-06-03T{h:02d}:00:00+00:00,{-20 if h == 13 else 100}" for h in range(24)]
    f.write_text("\n".join(rows) + "\n")
    d = _scenario(price={"sites": {"default": {"kind": "csv", "file": str(f), "unit": "per_MWh",
                                               "time_column": "time", "value_column": "eur_mwh"}}})
    tr = build_inputs(scenario_from_dict(d)).grid.price_per_kwh["a"]
    assert tr.at(0.0) == pytest.approx(0.1) and tr.at(13.5 * 3600) == pytest.approx(-0.02)


# ---------------------------------------------------------------------------- accounting


def test_co2_and_cost_are_grid_energy_times_the_step_means():
    d = _scenario(carbon={"sites": {"default": {"kind": "daily", "mean": 300, "noise_cv": 0.1}}},
                  price={"currency": "EUR", "sites": {"default": {"kind": "constant", "value": 0.25}}})
    d["policies"] = ["static", "feasibility_aware"]
    sc = scenario_from_dict(d)
    inp = build_inputs(sc)
    for label, t in run_policies(sc).items():
        ts = t["timeseries"]
        for _, r in ts.iloc[::37].iterrows():
            tr = inp.grid.carbon_g_per_kwh[r["site"]]
            mean = tr.integrate(r["t_s"], r["t_s"] + r["dt_s"]) / r["dt_s"]
            assert r["carbon_g_per_kwh"] == pytest.approx(mean)
            assert r["co2_kg"] == pytest.approx(r["grid_kwh"] * mean / 1000.0)
        s = summarize(t, policy=label, label=label)
        assert s["co2_kg"] == pytest.approx(float((ts["grid_kwh"] * ts["carbon_g_per_kwh"]).sum()) / 1000.0)
        assert s["grid_cost"] == pytest.approx(s["grid_kwh"] * 0.25)


def test_no_signal_no_keys():
    sc = scenario_from_dict(small_scenario_dict(duration_h=8, policies=["static"]))
    s = summarize(run_policies(sc)["static"], policy="static", label="static")
    assert "co2_kg" not in s and "grid_cost" not in s and "battery_discharge_kwh" not in s


def _grid_only(**extra):
    """No renewables to speak of: a job at a dirty grid, a free node at a clean one."""
    d = small_scenario_dict(duration_h=12)
    d["traces"]["renewable"] = {"default": {"kind": "curtailment_windows", "capacity_kw": 0.01, "windows_per_day": 0.5}}
    d["traces"]["carbon"] = {"sites": {"a": {"kind": "constant", "value": 500}, "b": {"kind": "constant", "value": 50}}}
    d["sites"][1]["nodes"] = 1  # b is busy with j0 for the first hour: j1 must start at a
    d["workloads"] = {"jobs": [{"id": "j0", "checkpoint_gb": 10, "work_gpu_h": 1, "arrival_h": 0, "origin": "b"},
                               {"id": "j1", "checkpoint_gb": 10, "work_gpu_h": 8, "arrival_h": 0, "origin": "a"}]}
    d["policies"] = ["static", {"name": "feasibility_aware", "min_dwell_h": 0}, "carbon_aware"]
    d.update(extra)
    return d


def test_carbon_aware_moves_a_grid_job_to_the_cleaner_grid():
    t = run_policies(scenario_from_dict(_grid_only()))
    s = {lb: summarize(v, policy=lb, label=lb) for lb, v in t.items()}
    assert s["static"]["migrations"] == 0 and s["feasibility_aware"]["migrations"] == 0
    migs = t["carbon_aware"]["migrations"]
    assert list(migs["job_id"]) == ["j1"] and list(migs["src"]) == ["a"] and list(migs["dst"]) == ["b"]
    assert migs["t_decision_s"].iloc[0] >= 3600.0  # once j0 has left b's only node
    assert s["carbon_aware"]["co2_kg"] < 0.6 * s["static"]["co2_kg"]  # idle nodes at a stay on its grid
    dec = t["carbon_aware"]["decisions"]
    placed = dec[dec["kind"] == "place"].set_index("job_id")["dst"].to_dict()
    assert placed == {"j0": "b", "j1": "a"}
    moved = dec[dec["kind"] == "migrate"].iloc[0]["decision"]
    sc = t["carbon_aware"]["candidate_scores"]
    first = sc[(sc["decision"] == moved) & (sc["rank"] == 0)].set_index("score")
    assert first["dst"].iloc[0] == "b" and first.loc["saved_co2_kg", "value"] > first.loc["cost_co2_kg", "value"]


def test_carbon_aware_stays_when_the_gap_is_below_its_threshold():
    d = _grid_only()
    d["policies"] = [{"name": "carbon_aware", "min_carbon_reduction_frac": 0.95}]
    t = run_policies(scenario_from_dict(d))
    assert len(t["carbon_aware"]["migrations"]) == 0


def test_price_cap_stops_the_grid_top_up_while_the_price_is_high():
    d = _grid_only()
    d["power"] = {"grid_limit_kw": 5.0}
    d["traces"]["price"] = {"sites": {"default": {"kind": "daily", "mean": 0.3, "amplitude_frac": 0.5, "noise_cv": 0}}}
    d["policies"] = [{"name": "carbon_aware", "label": "capped", "max_price_per_kwh": 0.3, "min_carbon_reduction_frac": 0.99},
                     {"name": "carbon_aware", "label": "free", "min_carbon_reduction_frac": 0.99}]
    sc = scenario_from_dict(d)
    t = run_policies(sc)
    ts = t["capped"]["timeseries"]
    high = ts["price_per_kwh"] > 0.3 + 1e-9
    assert high.any() and (ts.loc[high, "grid_topup_kw"] == 0).all()
    assert (ts.loc[~high, "grid_topup_kw"] == 5.0).all()
    assert (t["free"]["timeseries"]["grid_topup_kw"] == 5.0).all()
    s = {lb: summarize(v, policy=lb, label=lb) for lb, v in t.items()}
    assert s["capped"]["grid_cost"] < s["free"]["grid_cost"]


def test_policy_view_reads_signals_now_and_ahead():
    from testbed.controller.controller import Controller
    from testbed.controller.policy_api import ClusterView
    from testbed.policies import make_policy
    from testbed.substrate.sim import SimSubstrate

    d = _scenario(carbon={"sites": {"default": {"kind": "daily", "mean": 300, "noise_cv": 0}}})
    d["batteries"] = {"b": {"capacity_kwh": 2, "charge_kw": 1, "discharge_kw": 1, "initial_soc_frac": 0.5}}
    sc = scenario_from_dict(d)
    inp = build_inputs(sc)
    with SimSubstrate(inp) as sub:
        ctl = Controller(inp, make_policy(sc.policies[0], sc), sub)
        view = ClusterView(7200.0, ctl.cluster, inp)
        tr = inp.grid.carbon_g_per_kwh["a"]
        assert view.carbon_g_per_kwh("a") == tr.at(7200.0)
        assert view.carbon_g_per_kwh("a", 6 * 3600) == pytest.approx(tr.integrate(7200, 7200 + 6 * 3600) / (6 * 3600))
        assert view.price_per_kwh("a") is None and view.currency is None
        assert view.battery_soc_kwh("a") is None and view.battery_soc_kwh("b") == 1.0


# ---------------------------------------------------------------------------- batteries


@settings(max_examples=200, deadline=None)
@given(cap=st.floats(0.1, 50), ckw=st.floats(0.1, 10), dkw=st.floats(0.1, 10), eta=st.floats(0.3, 1.0),
       soc0=st.floats(0, 1), steps=st.lists(st.tuples(st.floats(-5, 5), st.sampled_from([60, 300, 900])),
                                            min_size=1, max_size=40))
def test_battery_conserves_energy_and_respects_its_limits(cap, ckw, dkw, eta, soc0, steps):
    b = Battery(capacity_kwh=cap, charge_kw=ckw, discharge_kw=dkw, round_trip_efficiency=eta, initial_soc_frac=soc0)
    soc = b.soc_kwh
    for flow, dt in steps:  # a surplus (> 0) or a deficit (< 0), never both in one step
        surplus, deficit = max(flow, 0.0), max(-flow, 0.0)
        avail_kw = b.available_kw(dt)
        r = b.step(dt, surplus_kwh=surplus, deficit_kwh=deficit)
        assert 0 <= r.charge_kwh <= min(surplus, ckw * dt / 3600) + 1e-12
        assert 0 <= r.discharge_kwh <= min(deficit, dkw * dt / 3600) + 1e-12
        assert r.discharge_kwh <= avail_kw * dt / 3600 + 1e-12
        assert r.loss_kwh == pytest.approx((1 - eta) * r.charge_kwh, abs=1e-12)
        assert r.soc_kwh == pytest.approx(soc + r.charge_kwh - r.loss_kwh - r.discharge_kwh, abs=1e-9)
        assert -1e-12 <= r.soc_kwh <= cap + 1e-12
        soc = r.soc_kwh
    with pytest.raises(ValueError, match="not both"):
        b.step(300, surplus_kwh=1.0, deficit_kwh=1.0)


def test_a_battery_shifts_curtailed_renewables_and_cuts_grid_energy():
    d = small_scenario_dict(duration_h=48, policies=["static"])
    d["traces"]["carbon"] = {"sites": {"default": {"kind": "constant", "value": 400}}}
    base = run_policies(scenario_from_dict(d))["static"]
    d["batteries"] = {"default": {"capacity_kwh": 6, "charge_kw": 2, "discharge_kw": 1.5}}
    withb = run_policies(scenario_from_dict(d))["static"]
    s0, s1 = (summarize(t, policy="static", label="static") for t in (base, withb))
    assert s1["battery_discharge_kwh"] > 0.5 and s1["battery_charge_kwh"] > s1["battery_discharge_kwh"]
    assert s1["grid_kwh"] < s0["grid_kwh"] - 0.5
    assert s1["co2_kg"] < s0["co2_kg"]


def test_battery_keys_must_name_sites():
    d = small_scenario_dict(duration_h=8)
    d["batteries"] = {"zz": {"capacity_kwh": 1, "charge_kw": 1, "discharge_kw": 1}}
    with pytest.raises(SpecError) as e:
        scenario_from_dict(d)
    assert e.value.problems == [("batteries.zz", "unknown site 'zz'")]


# ---------------------------------------------------------------------------- the example, end to end


def test_carbon_price_example_runs_and_reports(tmp_path):
    out = tmp_path / "cp"
    assert main(["run", str(ROOT / "scenarios" / "carbon-price.yaml"), "--out", str(out), "--no-progress"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["grid_signals"]["currency"] == "EUR"
    assert any(f["field"] == "traces.carbon.sites.paris.file" and f["sha256"] for f in manifest["input_files"])
    sums = {p: json.loads((out / p / "summary.json").read_text())
            for p in ("static", "feasibility_aware", "carbon_aware", "carbon_aware_price")}
    for s in sums.values():
        assert s["co2_kg"] > 0 and s["grid_cost"] > 0 and s["battery_discharge_kwh"] > 0
    assert sums["carbon_aware"]["co2_kg"] < sums["static"]["co2_kg"]
    import pandas as pd

    tr = pd.read_parquet(out / "traces.parquet")
    series = set(zip(tr["quantity"], tr["site"]))
    assert {("carbon_intensity", "paris"), ("electricity_price", "rome")} <= series
    md = (out / "comparison.md").read_text()
    assert "| CO2 kg |" in md and "| grid cost |" in md
    rep = tmp_path / "rep"
    assert main(["report", str(out), "--out", str(rep)]) == 0
    text = (rep / "report.md").read_text()
    assert "## Carbon and cost of grid energy" in text and "mean_co2_kg" in text


def test_federated_study_reports_co2_and_cost_of_its_grid_energy(tmp_path):
    import pandas as pd

    from testbed.runner import run_scenario
    from testbed.spec.load import LoadedScenario
    from tests.unit.federated_support import tiny

    d = tiny(max_rounds=2)
    d["policies"] = [{"name": "random", "k": 2}, "centralized"]
    d["traces"]["carbon"] = {"sites": {"default": {"kind": "constant", "value": 400}, "near": {"kind": "constant", "value": 100}}}
    d["traces"]["price"] = {"currency": "USD", "sites": {"default": {"kind": "constant", "value": 0.1}}}
    loaded = LoadedScenario(scenario=scenario_from_dict(d), path=ROOT / "fl.yaml", text="x\n", sha256="0" * 64,
                            topology_path=None)
    out = tmp_path / "fl"
    run_scenario(loaded, out_dir=out, substrate="sim", seed=None, progress=False, force=False, argv=[], plots=False)
    assert json.loads((out / "manifest.json").read_text())["grid_signals"]["currency"] == "USD"
    for label in ("random", "centralized"):
        s = json.loads((out / label / "summary.json").read_text())
        sites = pd.read_parquet(out / label / "sites.parquet")
        ci = sites["site"].map(lambda x: 100.0 if x == "near" else 400.0)
        assert s["co2_kg"] == pytest.approx(float((sites["grid_kwh"] * ci).sum()) / 1000.0)
        assert s["grid_cost"] == pytest.approx(s["grid_kwh"] * 0.1)
    assert "| CO2 kg | grid cost |" in (out / "comparison.md").read_text()
