"""A two-site cluster in a chosen state, with step-hold renewable traces given by hand, for the
policy tests (tests/unit/policies/test_policies_*.py)."""

from __future__ import annotations

import dataclasses

import numpy as np

from testbed.controller.cluster import Cluster, SiteState
from testbed.inputs import build_inputs
from testbed.spec import scenario_from_dict
from testbed.traces.base import Trace
from testbed.traces.forecast import WindowForecaster
from testbed.workload import JobSubmission
from tests.conftest import small_scenario_dict

H = 3600.0
LINEAR = {"p_active_kw": 0.75, "p_idle_kw": 0.05}  # no power profile: draw linear in the cap


def trace_kw(site: str, steps: list[tuple[float, float]]) -> Trace:
    """Step-hold renewable power: ``[(start_h, kW), ...]``, to 48 h."""
    return Trace(np.array([h * H for h, _ in steps]), np.array([kw for _, kw in steps]), unit="kW",
                 name=f"renewable:{site}", end_s=48 * H)


def policy_setup(renewable: dict[str, list[tuple[float, float]]], *, bias_frac: float = 0.0, grid_limit_kw=None,
                 jobs: dict[str, int] | None = None, policies=("feasibility_aware",), checkpoint_gb: float = 40.0,
                 bandwidth_gbps: float = 10.0):
    """Sites a and b (4 linear-profile nodes of 0.75 kW each), ``jobs`` running per site (6 GPU-h
    of work each, ids ``<site><k>``), the renewable traces ``{site: [(start_h, kW), ...]}``."""
    d = small_scenario_dict(node_types={"lin": LINEAR}, policies=list(policies))
    d["links"][0]["bandwidth_gbps"] = bandwidth_gbps
    for s in d["sites"]:
        s["nodes"], s["node_type"] = 4, "lin"
    if grid_limit_kw is not None:
        d["power"] = {"grid_limit_kw": grid_limit_kw}
    sc = scenario_from_dict(d)
    inputs = build_inputs(sc)
    traces = {s: trace_kw(s, steps) for s, steps in renewable.items()}
    windows = WindowForecaster(traces, {s: 0.75 for s in traces}, bias_frac=bias_frac)
    inputs = dataclasses.replace(inputs, renewable_kw=traces, windows=windows)
    cluster = Cluster([SiteState(s.name, s.nodes, sc.node_type_of(s.name), grid_limit_kw=sc.grid_limit_kw(s.name))
                       for s in sc.sites], sc.power.p_sys_kw)
    k = 0
    for site, n in (jobs or {}).items():
        for _ in range(n):
            cluster.admit(JobSubmission(f"{site}{k}", "m", checkpoint_gb, 6.0, 0.0, site), site, 0.0)
            k += 1
    cluster.start_queued(0.0)
    return sc, inputs, cluster
