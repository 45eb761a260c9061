"""A power cap holds a user's own training program (examples/workloads/train_loop.py) on a node
agent in a site namespace: its process tree in a cgroup of the run, the quota steered from its
progress lines, so it runs at the cap's fraction of its unthrottled rate as its own progress lines
count it; the enforced fraction and the power derived from it come back through the cap path
(AgentThrottleCaps.settle, as power.parquet gets them); no cgroup is left behind."""

from __future__ import annotations

import secrets
import time
from types import SimpleNamespace

import pytest

from testbed.netem.fabric import Fabric
from testbed.netem.owned.naming import new_run_id
from testbed.netem.plan import LinkInput, plan_fabric
from testbed.power.throttle.agent_throttle import AgentThrottleCaps
from testbed.power.caps import POWER_DERIVED, JobCap
from testbed.power.throttle.cgroups import find_run_cgroups
from testbed.power.gpu.profile import load_profile
from testbed.substrate.emulated.agents import AgentPool
from tests.conftest import ROOT
from tests.integration.conftest import our_namespaces

pytestmark = pytest.mark.root
torch = pytest.importorskip("torch", reason="the example program trains with torch")
PROGRAM = {"command": ["{python}", "train_loop.py"], "cwd": str(ROOT / "examples" / "workloads")}


class _Port:
    """The agents as the cap path's ThroughputPort (what the agent mover is in a run)."""

    def __init__(self, agents: AgentPool):
        self.agents = agents

    def job_site(self, job_id: str, site: str) -> str:
        return site

    def set_throughput(self, job_id: str, site: str, frac: float, cap_w: float | None):
        self.agents.expect_throttle(site, job_id)  # listed in the state file before it is made
        res = self.agents.client(site).set_throughput(job_id, frac=frac, cap_w=cap_w)
        return SimpleNamespace(frac=res.frac, throttle=res.throttle, reason=res.throttle_reason,
                               window=res.details.get("window"))


def _rate(client, seconds: float) -> float:
    """Steps per second from the program's own progress lines (the agent's status reads them)."""
    s0, t0 = client.call("status", job_id="j1")["steps"], time.monotonic()
    time.sleep(seconds)
    s1, t1 = client.call("status", job_id="j1")["steps"], time.monotonic()
    return (s1 - s0) / (t1 - t0)


def test_a_cap_holds_the_users_program_at_its_fraction():
    plan = plan_fabric(new_run_id(), ["a", "b"], [LinkInput("a", "b", 100, 100)], "none")
    profile = load_profile("rtx4090")
    with Fabric(plan) as fab:
        agents = AgentPool(fab, secrets.token_hex(16))
        try:
            agents.start()
            a = agents.client("a")
            a.call("start_job", job_id="j1", family="my-mlp", seed=5, steps_per_s=10_000, max_steps=None,
                   program=PROGRAM)
            caps = AgentThrottleCaps(_Port(agents), {"a": profile})
            cap = lambda frac: {"j1": JobCap("a", 100.0, frac, profile.draw_at_frac_w(frac))}  # noqa: E731
            rep = caps.apply(0.0, cap(1.0))["j1"]
            assert rep.throttle in ("cgroup-v1", "cgroup-v2"), rep
            assert [p.name for _, p in find_run_cgroups(plan.run_id)] == [f"tb-{plan.run_id}-a-j1"]
            time.sleep(0.5)
            free = _rate(a, 2.0)
            caps.apply(1.0, cap(0.5))
            time.sleep(1.5)  # the loop walks the quota down
            held = _rate(a, 4.0)
            got = caps.settle(2.0)["j1"]
            caps.apply(3.0, cap(1.0))
            time.sleep(0.3)
            free = (free + _rate(a, 2.0)) / 2  # before and after: the host's other load drifts
            assert held / free == pytest.approx(0.5, abs=0.1), (free, held)
            assert got.throughput_frac == pytest.approx(0.5, abs=0.1), got
            assert got.power_w == pytest.approx(profile.draw_at_frac_w(got.throughput_frac))
            assert got.power_basis == POWER_DERIVED and got.steps_per_s == pytest.approx(held, rel=0.25)
            st = a.call("status", job_id="j1")
            assert st["error"] is None and st["throttle"] == rep.throttle
        finally:
            agents.stop()
    assert find_run_cgroups(plan.run_id) == []
    assert our_namespaces(plan.run_id) == []
