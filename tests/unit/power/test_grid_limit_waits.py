"""The grid limit is enforced: when a site's budget cannot feed every running node even at the GPU's
lowest cap, the most recently started jobs wait (no progress, node idle) and the site stays within
its limit; only idle/waiting nodes (and transfers) can still exceed it, reported as overdraw."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from testbed.power.budget import plan_site
from testbed.power.node_model import NodePower
from testbed.spec import scenario_from_dict
from tests.conftest import run_policies, small_scenario_dict

RTX = "rtx4090-minipc"  # idle 0.08 kW; training at the 150 W lowest cap 0.49 kW


def rtx() -> NodePower:
    return NodePower.of(scenario_from_dict(small_scenario_dict()).all_node_types()[RTX])


def plan(budget_kw, n_running=3, n_idle=0, grid=True):
    return plan_site("a", rtx(), renewable_kw=0.0, grid_topup_kw=budget_kw if grid else None, n_running=n_running,
                     n_idle=n_idle, n_transfer_ends=0, p_sys_kw=1.8)


def test_plan_holds_the_fewest_jobs_that_make_the_rest_fit():
    node = rtx()
    floor_kw, idle_kw = node.active_kw(node.min_cap_w), node.node_type.p_idle_kw
    assert plan(3 * floor_kw).n_waiting == 0
    assert plan(None, grid=False).n_waiting == 0
    p = plan(2 * floor_kw + idle_kw + 0.005)
    assert p.n_waiting == 1 and p.cap_w >= node.min_cap_w
    assert 2 * node.active_kw(p.cap_w) + idle_kw <= 2 * floor_kw + idle_kw + 0.005 + 1e-9  # the two that train fit
    assert plan(2 * floor_kw + idle_kw - 0.005).n_waiting == 2
    assert plan(3 * idle_kw - 0.01).n_waiting == 3  # not even idle nodes fit: everything waits
    assert plan(floor_kw + 2 * idle_kw, n_idle=1).n_waiting == 3  # the idle node is fed first


def three_jobs_one_site(limit_kw, duration_h=24):
    d = small_scenario_dict(duration_h=duration_h)
    d["sites"][0]["nodes"] = 3
    for s in d["sites"]:
        s["node_type"] = RTX
    d["traces"]["renewable"] = {"default": {"kind": "curtailment_windows", "capacity_kw": 0.01,
                                            "windows_per_day": 0.001, "base_frac": 0.0}}
    d["workloads"] = {"jobs": [{"id": f"j{i}", "checkpoint_gb": 10, "work_gpu_h": 2, "arrival_h": 0, "origin": "a"}
                               for i in (1, 2, 3)]}
    d["power"] = {"grid_limit_kw": limit_kw}
    d["policies"] = ["static"]
    return run_policies(scenario_from_dict(d))["static"]


def test_the_last_started_job_waits_until_the_others_leave_room():
    node = rtx()
    floor_kw, idle_kw = node.active_kw(node.min_cap_w), node.node_type.p_idle_kw
    t = three_jobs_one_site(2 * floor_kw + idle_kw + 0.005)
    ts, jobs = t["timeseries"], t["jobs"].set_index("job_id")
    a = ts[ts["site"] == "a"]
    assert (a["waiting"].iloc[:5] == 1).all()
    assert ts["overdraw_kwh"].sum() == pytest.approx(0.0, abs=1e-9)
    assert (ts["grid_kwh"] <= ts["grid_topup_kw"] * ts["dt_s"] / 3600.0 + 1e-9).all()
    assert jobs.loc["j1", "waiting_s"] == 0 and jobs.loc["j2", "waiting_s"] == 0
    assert jobs.loc["j3", "waiting_s"] > 0
    first_done = min(jobs.loc["j1", "finished_s"], jobs.loc["j2", "finished_s"])
    assert jobs.loc["j3", "waiting_s"] == pytest.approx(first_done, abs=t["timeseries"]["dt_s"].max())
    assert jobs["status"].eq("completed").all()
    # the held job's power row: nothing requested; the backend was given the lowest cap
    p = t["power"]
    held = p[(p["job_id"] == "j3") & (p["t_s"] == 0)].iloc[0]
    assert held["cap_requested_w"] == 0.0 and held["cap_w"] == node.min_cap_w
    running = p[(p["job_id"] == "j1") & (p["t_s"] == 0)].iloc[0]
    assert running["cap_requested_w"] >= node.min_cap_w


def test_a_limit_below_idle_power_holds_every_job_and_reports_only_idle_overdraw():
    node = rtx()
    t = three_jobs_one_site(2 * node.node_type.p_idle_kw, duration_h=2)
    ts, jobs = t["timeseries"], t["jobs"]
    a = ts[ts["site"] == "a"]
    assert (a["waiting"] == 3).all() and (a["compute_kwh"] == 0).all()
    assert (jobs["work_left_gpu_h"] == jobs["work_gpu_h"]).all()
    assert np.allclose(a["overdraw_kwh"], a["idle_kwh"] - a["grid_topup_kw"] * a["dt_s"] / 3600.0, atol=1e-9)


@st.composite
def static_scenarios(draw):
    d = small_scenario_dict(duration_h=12, seed=draw(st.integers(0, 10_000)))
    for s in d["sites"]:
        s["nodes"] = draw(st.integers(1, 4))
        s["node_type"] = draw(st.sampled_from([RTX, "a100-server", "jetson-thor"]))  # lowest cap draws > idle
    d["traces"]["renewable"] = {"default": {
        "kind": "curtailment_windows", "capacity_kw": draw(st.floats(0.01, 3.0)),
        "windows_per_day": draw(st.floats(0.5, 4.0)), "base_frac": draw(st.floats(0.0, 0.45)),
    }}
    d["power"] = {"grid_limit_kw": draw(st.floats(0.0, 2.5))}
    d["workloads"] = {"arrivals": {"jobs_per_day": draw(st.floats(4, 30)), "until_h": 6},
                      "mix": [{"family": "m", "checkpoint_gb": 10, "work_gpu_h": [0.5, 6]}]}
    d["policies"] = ["static"]
    return scenario_from_dict(d)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(static_scenarios())
def test_without_transfers_only_idle_and_waiting_nodes_exceed_the_limit(sc):
    ts = run_policies(sc)["static"]["timeseries"]
    assert (ts["overdraw_kwh"] <= ts["idle_kwh"] + 1e-9).all()
    parts = ts["compute_kwh"] + ts["transfer_kwh"] + ts["idle_kwh"]
    assert np.allclose(parts, ts["demand_kwh"], rtol=0, atol=1e-9)
