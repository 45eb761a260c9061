"""Issue 12's agent flood check: 2,000 idle unauthenticated connections during a run; the run completes.

A netns run with node agents (two sites, one migration). As soon as the agents are up, and before
the controller has opened its first connection to any of them, a hostile peer on the management
network — site b's namespace — opens 2,000 idle connections to site a's agent's control port,
and keeps re-opening every one the agent closes until the run ends. The run must finish with 0,
migrate its job, and leave no namespace, cgroup, process or temp folder behind.
"""

from __future__ import annotations

import resource
import threading
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest
import yaml

from testbed.cli import main
from testbed.netem.nsexec import socket_factory
from testbed.substrate.emulated import agents as agents_mod
from tests.agent_flood import Flood
from tests.conftest import small_scenario_dict
from tests.integration.conftest import our_namespaces

pytestmark = pytest.mark.root
FLOOD = 2000


def _scenario(tmp_path: Path) -> Path:
    """test_netns_substrate's agents scenario, one policy: j1 migrates from a to b at 1 h."""
    d = small_scenario_dict(duration_h=8)
    d["emulation"] = {"time_scale": 100, "byte_scale": 0.001, "nodes": "agents", "steps_per_s": 20}
    d["links"][0].update(bandwidth_gbps=1, latency_ms=0.0)
    d["traces"] = {
        "renewable": {"a": {"kind": "curtailment_windows", "capacity_kw": 0.1, "windows_per_day": 0.001},
                      "b": {"kind": "csv", "file": str(tmp_path / "b.csv")}},
    }
    (tmp_path / "b.csv").write_text("timestamp,value\n0,0\n3600,2.0\n21600,0\n28800,0\n")
    d["workloads"] = {"jobs": [{"id": "j1", "checkpoint_gb": 40, "work_gpu_h": 6, "origin": "a"}]}
    d["policies"] = ["energy_only"]
    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump(d))
    return f


def test_agent_flood_during_a_run(tmp_path, monkeypatch):
    pytest.importorskip("torch", reason="training nodes need torch (scripts/setup.sh installs torch==2.13.0)")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < FLOOD + 512:
        if hard != resource.RLIM_INFINITY and hard < FLOOD + 512:
            pytest.skip(f"the flood needs {FLOOD + 512} open files here; the hard limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (FLOOD + 512, hard))

    seen: dict = {"runs": [], "pids": [], "dirs": []}
    stop = threading.Event()
    floods: list[Flood] = []
    flooders: list[threading.Thread] = []
    original_start, original_stop = agents_mod.AgentPool.start, agents_mod.AgentPool.stop

    def start(pool) -> None:
        original_start(pool)
        plan = pool.fabric.plan
        seen["runs"].append(plan.run_id)
        seen["pids"] += [p.pid for p in pool._launcher._procs.values()]  # the process runtime's
        seen["dirs"].append(pool.workdir)
        target = next(s for s in plan.sites if s.name == "a")
        flood = Flood((target.mgmt_addr, agents_mod.CONTROL_PORT), FLOOD,
                      socket_factory=socket_factory(pool.fabric.site_ns("b")))
        floods.append(flood)
        seen["reopened"] = 0

        def keep_flooding() -> None:
            while not stop.is_set():
                seen["reopened"] += flood.refill()
                stop.wait(0.1)

        th = threading.Thread(target=keep_flooding, daemon=True)
        th.start()
        flooders.append(th)

    def stop_pool(pool) -> None:
        stop.set()
        for th in flooders:
            th.join(timeout=10)
        seen["log_a"] = (pool.workdir / "a" / "agent.log").read_text(errors="replace")
        original_stop(pool)

    monkeypatch.setattr(agents_mod.AgentPool, "start", start)
    monkeypatch.setattr(agents_mod.AgentPool, "stop", stop_pool)
    out = tmp_path / "r"
    t0 = time.monotonic()
    try:
        rc = main(["run", str(_scenario(tmp_path)), "--substrate", "netns", "--out", str(out), "--no-progress"])
    finally:
        stop.set()
        for f in floods:
            f.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    wall_s = time.monotonic() - t0

    assert rc == 0
    assert len(floods) == 1 and floods[0].seen["challenged"] + floods[0].seen["closed_unchallenged"] == FLOOD
    assert "evicted unauthenticated connections" in seen["log_a"] and "Traceback" not in seen["log_a"]
    m = pd.read_parquet(out / "energy_only" / "migrations.parquet")
    assert len(m) == 1 and m["status"].iloc[0] == "completed", m["detail"].iloc[0]
    from testbed.power.throttle.throttle import find_run_cgroups

    (run_id,) = seen["runs"]
    assert our_namespaces(run_id) == []
    assert find_run_cgroups(run_id) == []
    assert not any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in seen["pids"])
    assert not any(d.exists() for d in seen["dirs"])
    print(f"flood: {FLOOD} connections, {seen['reopened']} re-opened after the agent closed them; run {wall_s:.1f} s")
