"""Real jobs, real checkpoints, real migrations over the shaped WAN, and the faults around them."""

from __future__ import annotations

import secrets
import threading
import time

import pytest

from testbed.agent.client import AgentError
from testbed.netem.fabric import Fabric
from testbed.netem.owned.naming import new_run_id
from testbed.netem.nsexec import in_netns
from testbed.netem.plan import LinkInput, plan_fabric
from testbed.power.throttle.cgroups import cgroup_mounts, find_run_cgroups
from testbed.substrate.emulated.agents import TRANSFER_PORT, AgentPool
from tests.integration.conftest import our_namespaces

pytestmark = pytest.mark.root
torch = pytest.importorskip("torch", reason="training nodes need torch (scripts/setup.sh installs torch==2.13.0)")
EFF = 1448 / 1514
FAMILY, SEED, STEPS = "resnet50", 11, 40


def _twin_losses() -> list[float]:
    from testbed.nodes.job import TrainingJob

    job = TrainingJob.create(FAMILY, SEED)
    return [job.step() for _ in range(STEPS)]


def _wait_steps(client, jid: str, n: int, timeout_s: float = 60) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        st = client.call("status", job_id=jid)
        if st["steps"] >= n:
            return st
        time.sleep(0.05)
    raise AssertionError(f"{jid} did not reach {n} steps")


def _docker_available() -> bool:
    import shutil

    return shutil.which("dockerd") is not None and shutil.which("debootstrap") is not None


@pytest.fixture(params=["process", pytest.param("docker", marks=pytest.mark.docker)])
def pool(request):
    if request.param == "docker" and not _docker_available():
        pytest.skip("docker runtime needs Debian's docker.io and debootstrap (scripts/setup.sh installs them)")
    plan = plan_fabric(new_run_id(), ["a", "b"], [LinkInput("a", "b", 100, 100)], "none")
    with Fabric(plan) as fab:
        agents = AgentPool(fab, secrets.token_hex(16), runtime=request.param)
        try:
            agents.start()  # on failure, stop() still releases what started (its engine, cgroups, files)
            yield fab, agents
        finally:
            agents.stop()
    assert our_namespaces(plan.run_id) == []
    assert find_run_cgroups(plan.run_id) == []


def test_migration_is_exact_and_timed(pool):
    fab, agents = pool
    a, b = agents.client("a"), agents.client("b")
    a.call("start_job", job_id="j1", family=FAMILY, seed=SEED, steps_per_s=200, max_steps=15)
    _wait_steps(a, "j1", 15)
    ck = a.call("checkpoint_and_pause", job_id="j1")
    assert ck["step"] == 15 and ck["size_bytes"] > 0
    ballast = 12_000_000
    sent = a.call("send_checkpoint", job_id="j1", dst_addr=fab.site_addr("b"), dst_port=TRANSFER_PORT,
                  ballast_bytes=ballast, transfer_id="j1-m1")
    rep = sent["report"]
    assert rep["status"] == "completed"
    n_bytes = ck["size_bytes"] + ballast
    expected_s = n_bytes * 8 / (100e6 * EFF)
    assert rep["t_transfer_s"] == pytest.approx(expected_s, rel=0.10)
    assert sent["t_ballast_save_s"] > 0 and ck["t_save_s"] > 0 and ck["t_pause_s"] >= 0  # ballast went to disk first
    # the destination stored checkpoint + ballast: the checkpoint is the file's front
    loaded = b.call("load_and_resume", job_id="j1", transfer_id="j1-m1", sha256=ck["sha256"], steps_per_s=200,
                    max_steps=STEPS, checkpoint_bytes=ck["size_bytes"])
    assert loaded["step"] == 15
    assert loaded["bytes_read"] == n_bytes  # all of it synced and read back from the device
    assert min(loaded["t_persist_s"], loaded["t_read_s"], loaded["t_deserialize_s"], loaded["t_restore_s"]) > 0
    a.call("free", job_id="j1")
    _wait_steps(b, "j1", STEPS)
    assert b.call("losses", job_id="j1")["losses"] == _twin_losses()  # bit-identical to the unmigrated twin
    if agents.runtime == "docker" and "v1_cpu" in cgroup_mounts():  # v2: the container's cgroup cannot delegate
        _a_cap_holds_a_users_program_in_its_container(fab, agents)


def _a_cap_holds_a_users_program_in_its_container(fab, agents) -> None:
    """The site's container sees the host's cgroup tree (writable): a user program under a 50 % cap gets
    a cgroup throttle inside it, below the container's own cgroup, and runs at about half its free
    rate; when the container is killed its cgroups go with it."""
    from tests.integration.test_user_workload_throttle import PROGRAM

    def _rate(client, seconds: float) -> float:  # steps/s from the program's own progress lines
        s0, t0 = client.call("status", job_id="u1")["steps"], time.monotonic()
        time.sleep(seconds)
        return (client.call("status", job_id="u1")["steps"] - s0) / (time.monotonic() - t0)

    run, a = fab.plan.run_id, agents.client("a")
    a.call("start_job", job_id="u1", family="my-mlp", seed=5, steps_per_s=10_000, max_steps=None, program=PROGRAM)
    agents.expect_throttle("a", "u1")
    res = a.set_throughput("u1", frac=1.0)
    assert res.throttle in ("cgroup-v1", "cgroup-v2"), res.throttle_reason
    made = [p for _, p in find_run_cgroups(run)]
    # below the container's own cgroup, <hierarchy>/tb-<run>/<container id>/
    assert [p.name for p in made] == [f"tb-{run}-a-u1"] and made[0].parent.parent.name == f"tb-{run}"
    time.sleep(0.5)
    free = _rate(a, 2.0)
    a.set_throughput("u1", frac=0.5)
    time.sleep(1.5)  # the loop walks the quota down
    held = _rate(a, 4.0)
    a.set_throughput("u1", frac=1.0)
    time.sleep(0.3)
    free = (free + _rate(a, 2.0)) / 2  # before and after: the host's other load drifts
    print(f"\nuser program in a container: {res.throttle}, free {free:.1f} steps/s, "
          f"at 0.5 {held:.1f} ({held / free:.2f})")
    assert held / free == pytest.approx(0.5, abs=0.1), (free, held)
    agents.kill("a")  # docker kill, the throttle still open: runc removes the container's cgroups, ours inside
    deadline = time.monotonic() + 10
    while find_run_cgroups(run) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert find_run_cgroups(run) == []


def _start_paused_at(a, jid: str, steps: int) -> dict:
    a.call("start_job", job_id=jid, family=FAMILY, seed=SEED, steps_per_s=200, max_steps=steps)
    _wait_steps(a, jid, steps)
    return a.call("checkpoint_and_pause", job_id=jid)


def _finish_at_source(a, jid: str) -> None:
    a.call("resume", job_id=jid)
    st = a.call("status", job_id=jid)
    assert st["steps"] >= 10 and not st["paused"]


def test_link_cut_mid_transfer_keeps_the_job(pool):
    from pyroute2 import IPRoute

    fab, agents = pool
    a = agents.client("a")
    _start_paused_at(a, "j2", 10)
    link = fab.plan.link("a", "b")

    def cut():
        time.sleep(0.3)
        with in_netns(fab.site_ns("a")):
            with IPRoute() as ipr:
                ipr.link("set", index=ipr.link_lookup(ifname=link.if_a)[0], state="down")

    th = threading.Thread(target=cut)
    th.start()
    sent = a.call("send_checkpoint", job_id="j2", dst_addr=fab.site_addr("b"), dst_port=TRANSFER_PORT,
                  ballast_bytes=30_000_000, transfer_id="j2-m1", deadline_s=3.0)
    th.join()
    assert sent["report"]["status"] == "failed"
    _finish_at_source(a, "j2")


def test_destination_killed_mid_transfer_keeps_the_job(pool):
    fab, agents = pool
    a = agents.client("a")
    _start_paused_at(a, "j3", 10)
    th = threading.Thread(target=lambda: (time.sleep(0.3), agents.kill("b")))
    th.start()
    sent = a.call("send_checkpoint", job_id="j3", dst_addr=fab.site_addr("b"), dst_port=TRANSFER_PORT,
                  ballast_bytes=30_000_000, transfer_id="j3-m1", deadline_s=3.0)
    th.join()
    assert sent["report"]["status"] == "failed"
    _finish_at_source(a, "j3")


def test_corrupted_checkpoint_is_refused_and_the_job_kept(pool):
    fab, agents = pool
    a, b = agents.client("a"), agents.client("b")
    ck = _start_paused_at(a, "j4", 10)
    sent = a.call("send_checkpoint", job_id="j4", dst_addr=fab.site_addr("b"), dst_port=TRANSFER_PORT,
                  ballast_bytes=0, transfer_id="j4-m1")
    assert sent["report"]["status"] == "completed"
    bad_sha = ("0" if ck["sha256"][0] != "0" else "1") + ck["sha256"][1:]
    with pytest.raises(AgentError, match="(?i)sha-?256|checkpoint"):
        b.call("load_and_resume", job_id="j4", transfer_id="j4-m1", sha256=bad_sha)
    assert "j4" not in b.call("ping")["jobs"]  # nothing half-started at the destination
    _finish_at_source(a, "j4")
