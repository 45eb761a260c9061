"""A sweep of emulation trials across two Ray nodes started with ``ray start`` (head + one worker):
each trial's namespaces, shaped links and transfers live on the node whose Ray worker runs it, so
that node needs root (here both nodes are this machine, run as root). Both nodes run a trial; every
trial moves its checkpoint across a shaped link for real and leaves no namespace behind."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from testbed.cli import main
from testbed.sweep.ray_backend import RayUnavailable, import_ray
from tests.conftest import small_scenario_dict
from tests.integration.conftest import our_namespaces
from tests.unit.sweep.ray_cluster_support import RayCluster
from tests.unit.sweep_support import write_sweep

try:
    import_ray()
except RayUnavailable:  # pragma: no cover - ray is in the 'sweep' extra that setup.sh installs
    pytest.skip("ray is not installed (pip install -e '.[sweep]')", allow_module_level=True)

pytestmark = pytest.mark.root


def _scenario(tmp_path) -> dict:
    """8 h, one 40 GB job that energy_only moves from a to b at 1 h (as in test_netns_substrate)."""
    d = small_scenario_dict(duration_h=8)
    d["emulation"] = {"time_scale": 100, "byte_scale": 0.001}
    d["links"][0].update(bandwidth_gbps=1, latency_ms=0.0)
    (tmp_path / "b.csv").write_text("timestamp,value\n0,0\n3600,2.0\n21600,0\n28800,0\n")
    d["traces"] = {
        "renewable": {"a": {"kind": "curtailment_windows", "capacity_kw": 0.1, "windows_per_day": 0.001},
                      "b": {"kind": "csv", "file": str(tmp_path / "b.csv")}},  # absolute: the same path on every node
        "bandwidth": {"events": []},
    }
    d["workloads"] = {"jobs": [{"id": "j1", "checkpoint_gb": 40, "work_gpu_h": 6, "origin": "a"}]}
    d["policies"] = ["static", "energy_only"]
    return d


@pytest.mark.slow  # about 1-2 min on 2 cores: a two-node Ray start and two emulation trials at once
def test_emulation_trials_run_on_both_ray_nodes(tmp_path, monkeypatch, capsys):
    path = write_sweep(tmp_path, scenario=_scenario(tmp_path),
                       sweep={"substrate": "netns", "seeds": 2, "grid": {"links[0].bandwidth_gbps": [1]}})
    with RayCluster() as cluster:
        cluster.generate_token()
        cluster.start_head(cpus=2)   # an emulation trial asks Ray for 2 CPUs: one trial per node at a time
        cluster.add_worker(cpus=2)
        monkeypatch.setenv("HOME", str(cluster.home))
        for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_ADDRESS"):
            monkeypatch.delenv(name, raising=False)
        out = tmp_path / "out"
        assert main(["sweep", str(path), "--out", str(out), "--ray", cluster.address]) == 0
    assert not cluster.processes()
    assert "2 trials: 0 reused, 2 run, 0 failed" in capsys.readouterr().out
    records = {p.parent: json.loads(p.read_text()) for p in out.glob("trials/*/seed-*/trial.json")}
    assert len(records) == 2 and all(r["status"] == "completed" and r["substrate"] == "netns" for r in records.values())
    assert len({r["ray_node"] for r in records.values()}) == 2, "both trials ran on one node"
    for trial in records:
        m = pd.read_parquet(trial / "energy_only" / "migrations.parquet")
        assert list(m["status"]) == ["completed"] and "measured" in m["detail"].iloc[0]
        sub = json.loads((trial / "manifest.json").read_text())["substrate"]
        assert sub["substrate"] == "netns" and "transfer_s" in sub["measured"][0]
        assert our_namespaces(sub["run_id"]) == []
