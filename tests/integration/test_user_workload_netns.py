"""A user's PyTorch training loop (examples/workloads/train_loop.py) on node agents in site
namespaces: its own checkpoint crosses the shaped WAN and it resumes exactly (the same state digest
as an uninterrupted run); under `testbed run --substrate netns` the migration is recorded with
predicted and measured times like any other."""

from __future__ import annotations

import secrets
import time

import pandas as pd
import pytest

from testbed.cli import main
from testbed.netem.fabric import Fabric
from testbed.netem.owned.naming import new_run_id
from testbed.netem.plan import LinkInput, plan_fabric
from testbed.substrate.emulated.agents import TRANSFER_PORT, AgentPool
from tests.conftest import ROOT
from tests.integration.conftest import our_namespaces

pytestmark = pytest.mark.root
torch = pytest.importorskip("torch", reason="the example program trains with torch")
EXAMPLE = ROOT / "examples" / "workloads"
EFF = 1448 / 1514
PROGRAM = {"command": ["{python}", "train_loop.py"], "cwd": str(EXAMPLE)}


def _wait(client, jid: str, pred, timeout_s: float = 180.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        st = client.call("status", job_id=jid)
        assert st["error"] is None, st
        if pred(st):
            return st
        time.sleep(0.05)
    raise AssertionError(f"{jid}: not there after {timeout_s} s")


def test_user_checkpoint_crosses_the_wan_and_resumes_exactly():
    plan = plan_fabric(new_run_id(), ["a", "b"], [LinkInput("a", "b", 100, 100)], "none")
    steps = 150
    with Fabric(plan) as fab:
        agents = AgentPool(fab, secrets.token_hex(16))
        try:
            agents.start()
            a, b = agents.client("a"), agents.client("b")
            b.call("start_job", job_id="ref", family="my-mlp", seed=21, steps_per_s=1000, max_steps=steps,
                   program=PROGRAM)
            a.call("start_job", job_id="j1", family="my-mlp", seed=21, steps_per_s=40, max_steps=steps,
                   program=PROGRAM)
            _wait(a, "j1", lambda s: s["steps"] >= 20)
            ck = a.call("checkpoint_and_pause", job_id="j1")
            assert 20 <= ck["step"] < steps
            ballast = 5_000_000
            sent = a.call("send_checkpoint", job_id="j1", dst_addr=fab.site_addr("b"), dst_port=TRANSFER_PORT,
                          ballast_bytes=ballast, transfer_id="j1-m1")
            rep = sent["report"]
            assert rep["status"] == "completed" and sent["checkpoint_bytes"] == ck["size_bytes"]
            # over the shaped 100 Mbit/s link: the program's checkpoint + ballast at TCP goodput
            assert rep["t_transfer_s"] == pytest.approx((ck["size_bytes"] + ballast) * 8 / (100e6 * EFF), rel=0.10)
            loaded = b.call("load_and_resume", job_id="j1", transfer_id="j1-m1", sha256=ck["sha256"],
                            checkpoint_bytes=ck["size_bytes"], steps_per_s=1000, max_steps=steps, seed=21,
                            program=PROGRAM)
            assert loaded["step"] == ck["step"]
            a.call("free", job_id="j1")
            moved = _wait(b, "j1", lambda s: s["done"])
            ref = _wait(b, "ref", lambda s: s["done"])
            assert moved["digest"] and moved["digest"] == ref["digest"]
        finally:
            agents.stop()
    assert our_namespaces(plan.run_id) == []


def test_example_scenario_migrates_the_user_program_on_netns(tmp_path):
    out = tmp_path / "r"
    assert main(["run", str(EXAMPLE / "user_workload.yaml"), "--substrate", "netns", "--out", str(out),
                 "--no-progress"]) == 0
    m = pd.read_parquet(out / "energy_only" / "migrations.parquet")
    assert len(m) == 1 and m["status"].iloc[0] == "completed", m["detail"].iloc[0]
    row = m.iloc[0]
    # the program's own checkpoint (a few tens of kB of torch.save), not the stand-in's
    assert 10_000 < row["checkpoint_file_bytes"] < 1_000_000
    assert row["actual_transfer_s"] == pytest.approx(8 * 40 / EFF, rel=0.10)  # + ballast to 40 GB x 0.001
    assert row["predicted_transfer_s"] == pytest.approx(320.0)
    assert row["actual_load_s"] > 0 and row["actual_checkpoint_s"] > 0
    # the caps reach the user's program through its cgroup at both sites: measured, no NaN
    pw = pd.read_parquet(out / "energy_only" / "power.parquet")
    assert set(pw["site"]) == {"a", "b"} and set(pw["throttle"]) <= {"cgroup-v1", "cgroup-v2"}
    assert pw["throughput_frac_enforced"].notna().all() and pw["gpu_power_w"].notna().all()


BROKEN = '''
import json, os, signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: sys.exit(3))   # breaks the contract: no checkpoint, exit 3
step = 0
while True:
    with open(os.environ["TESTBED_PROGRESS_PATH"], "a") as f:
        f.write(json.dumps({"step": step}) + "\\n")
    step += 1
    time.sleep(0.1)
'''


def test_a_program_that_fails_to_checkpoint_is_a_failed_migration(tmp_path):
    import shutil

    import yaml

    shutil.copy(EXAMPLE / "b_surplus.csv", tmp_path / "b_surplus.csv")
    (tmp_path / "broken.py").write_text(BROKEN)
    d = yaml.safe_load((EXAMPLE / "user_workload.yaml").read_text())
    d["workloads"]["programs"] = {"my-mlp": {"command": ["{python}", "broken.py"]}}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(d))
    out = tmp_path / "r"
    assert main(["run", str(tmp_path / "s.yaml"), "--substrate", "netns", "--out", str(out), "--no-progress"]) == 0
    m = pd.read_parquet(out / "energy_only" / "migrations.parquet")
    assert len(m) >= 1 and (m["status"] == "failed").all()
    detail = m["detail"].iloc[0]
    assert "checkpoint failed" in detail and "exited with 3 on SIGTERM" in detail, detail
