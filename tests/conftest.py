"""Shared fixtures: small scenarios built in memory, and the repository root."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def small_scenario_dict(**overrides) -> dict:
    """Two sites, one 10 Gbit/s link, constant bandwidth, explicit jobs: easy to reason about."""
    base = {
        "name": "small",
        "seed": 1,
        "duration_h": 24,
        "step_s": 300,
        "sites": [
            {"name": "a", "lat_deg": 45.0, "lon_deg": 9.0, "nodes": 2},
            {"name": "b", "lat_deg": 48.0, "lon_deg": 11.0, "nodes": 2},
        ],
        "links": [{"a": "a", "b": "b", "bandwidth_gbps": 10, "latency_ms": 5}],
        "traces": {
            "renewable": {"default": {"kind": "curtailment_windows", "capacity_kw": 2.0, "windows_per_day": 2}},
        },
        "workloads": {"jobs": [
            {"id": "j1", "checkpoint_gb": 40, "work_gpu_h": 6, "arrival_h": 0, "origin": "a"},
            {"id": "j2", "checkpoint_gb": 24, "work_gpu_h": 4, "arrival_h": 1, "origin": "b"},
        ]},
        "policies": ["static", "energy_only", "feasibility_aware", "no_filter"],
    }
    out = copy.deepcopy(base)
    out.update(overrides)
    return out


def run_policies(sc, seed=None):
    """Run every policy of a validated scenario on the sim substrate; tables per policy label."""
    from testbed.controller.controller import Controller
    from testbed.inputs import build_inputs
    from testbed.policies import make_policy
    from testbed.substrate.sim import SimSubstrate

    inputs = build_inputs(sc, seed)
    out = {}
    for spec in sc.policies:
        with SimSubstrate(inputs) as sub:
            rec = Controller(inputs, make_policy(spec, inputs.scenario), sub).run()
        out[spec.label or spec.name] = rec.tables()
    return out


@pytest.fixture
def root() -> Path:
    return ROOT


@pytest.fixture(autouse=True)
def _no_machine_dataplane_capacity(tmp_path_factory, monkeypatch):
    """Tests never read the relay capacity `testbed bench shaping` cached for this machine: the
    defaults apply unless a test writes its own cache (testbed.netem.dataplane_capacity)."""
    from testbed.netem.dataplane_capacity import CACHE_ENV

    monkeypatch.setenv(CACHE_ENV, str(tmp_path_factory.getbasetemp() / "no-dataplane-capacity.json"))
