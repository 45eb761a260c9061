"""A tiny federated scenario for the PowerTrip tests (4 participants + an aggregator)."""

from __future__ import annotations

import copy

from testbed.spec.load import scenario_from_dict

BASE = {
    "name": "fl-tiny",
    "seed": 3,
    "duration_h": 4,
    "step_s": 300,
    "sites": [
        {"name": "agg", "lat_deg": 39.10, "lon_deg": -94.58, "node_type": "a100-server", "nodes": 2},
        {"name": "near", "lat_deg": 38.63, "lon_deg": -90.20, "node_type": "a100-server", "nodes": 4},
        {"name": "mid", "lat_deg": 41.88, "lon_deg": -87.63, "node_type": "rtx4090-minipc", "nodes": 2},
        {"name": "far", "lat_deg": 40.71, "lon_deg": -74.01, "node_type": "rtx4090-minipc", "nodes": 2},
        {"name": "tiny", "lat_deg": 34.05, "lon_deg": -118.24, "node_type": "jetson-thor", "nodes": 2},
    ],
    "links": [
        {"a": "near", "b": "agg", "bandwidth_gbps": 10},
        {"a": "mid", "b": "agg", "bandwidth_gbps": 5},
        {"a": "far", "b": "agg", "bandwidth_gbps": 2.5},
        {"a": "tiny", "b": "agg", "bandwidth_gbps": 1},
    ],
    "traces": {"renewable": {"default": {"kind": "google_synthetic", "capacity_per_active": 1.6}}},
    "federated": {
        "aggregator": "agg",
        "data": {"partition": "iid"},
        "training": {"local_epochs": 1, "lr": 0.1},
        "compute": {"samples_per_s": 20, "data_scale": 10},
        "update_gb": 1.0,
        "round_time": "straggler",  # one clock keeps these tests short (the default runs both)
        "target_accuracy": 0.5,
        "max_rounds": 4,
        "max_hours": 3,
    },
    "policies": [{"name": "random", "k": 2}, {"name": "static_k", "k": [1, 3]}, "fixed_radius", "centralized",
                 {"name": "powertrip", "k_init": 1, "window": 1}],
}


def tiny(**federated) -> dict:
    d = copy.deepcopy(BASE)
    d["federated"].update(federated)
    return d


def tiny_scenario(**federated):
    return scenario_from_dict(tiny(**federated))
