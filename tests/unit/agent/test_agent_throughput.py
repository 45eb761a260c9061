"""``set_throughput``: its arguments, the quota arithmetic, and the runner/agent without root."""

from __future__ import annotations

import json
import time

import pytest

from testbed.agent.agent import Agent
from testbed.agent.protocol import RequestRefused, SetThroughput, decode_request
from testbed.agent.runner import JobRunner, cgroup_quota
from testbed.power.throttle.throttle import DutyCycleThrottle

TOKEN = "t" * 32


def req(args: dict) -> bytes:
    return json.dumps({"token": TOKEN, "cmd": "set_throughput", "args": args}).encode()


@pytest.mark.parametrize(("args", "where"), [
    ({"job_id": "j1"}, "args.frac"),
    ({"job_id": "j1", "frac": 0}, "args.frac"),
    ({"job_id": "j1", "frac": 1.01}, "args.frac"),
    ({"job_id": "j1", "frac": -0.5}, "args.frac"),
    ({"job_id": "j1", "frac": "half"}, "args.frac"),
    ({"job_id": "j1", "frac": 0.5, "cap_w": -1}, "args.cap_w"),
    ({"job_id": "../j", "frac": 0.5}, "args.job_id"),
    ({"job_id": "j1", "frac": 0.5, "cores": 2}, "args.cores"),
])
def test_refused_arguments(args, where):
    with pytest.raises(RequestRefused, match=where):
        decode_request(req(args), TOKEN)


def test_valid_arguments():
    cmd, args = decode_request(req({"job_id": "j1", "frac": 0.5, "cap_w": 200}), TOKEN)
    assert cmd == "set_throughput" and isinstance(args, SetThroughput)
    assert (args.frac, args.cap_w) == (0.5, 200)
    assert decode_request(req({"job_id": "j1", "frac": 1}), TOKEN)[1].cap_w is None


def test_quota_period_spans_two_target_steps():
    cores, period_us = cgroup_quota(2.5, 0.02)  # 2.5 steps/s
    assert period_us == 800_000  # two target steps
    assert cores == pytest.approx(0.02)
    assert cgroup_quota(50.0, 0.3)[1] == 100_000  # never below 0.1 s
    assert cgroup_quota(0.1, 0.3)[1] == 1_000_000  # never above the kernel's 1 s
    cores, period_us = cgroup_quota(0.1, 1e-7)
    assert cores * period_us == pytest.approx(1000)  # the kernel's 1 ms floor


class FakeJob:
    def __init__(self):
        self.steps_done, self.loss_history = 0, []

    def step(self) -> float:
        self.steps_done += 1
        self.loss_history.append(1.0)
        return 1.0


class ClosingThrottle(DutyCycleThrottle):
    closed = 0

    def close(self) -> None:
        self.closed += 1


def test_runner_reports_and_releases_its_throttle():
    runner = JobRunner(FakeJob(), steps_per_s=200.0, max_steps=None)
    runner.start()
    try:
        assert runner.status()["throughput_frac"] == 1.0 and runner.status()["throttle"] is None
        th = ClosingThrottle()
        res = runner.set_throughput(0.25, th, cap_w=150.0)
        assert res["frac"] == 0.25 and res["throttle"] == "duty-cycle" and res["cap_w"] == 150.0
        assert res["target_steps_per_s"] == 50.0
        assert runner.status()["throughput_frac"] == 0.25 and runner.status()["throttle"] == "duty-cycle"
        with pytest.raises(ValueError):
            runner.set_throughput(0.0)
        with pytest.raises(ValueError, match="already has a throttle"):
            runner.set_throughput(0.5, ClosingThrottle())
        time.sleep(0.05)
        assert runner.cpu_s_per_step is not None
    finally:
        runner.stop()
    assert th.closed == 1 and runner.throttle is None and not runner._thread.is_alive()


def test_agent_without_a_run_id_uses_duty_cycle_and_frees(tmp_path, monkeypatch):
    agent = Agent("a", tmp_path, TOKEN)
    runner = JobRunner(FakeJob(), steps_per_s=100.0, max_steps=None)
    agent.jobs["j1"] = runner
    runner.start()
    try:
        res = agent.set_throughput(SetThroughput(job_id="j1", frac=0.5, cap_w=200))
        assert res["job_id"] == "j1" and res["throttle"] == "duty-cycle" and "no run id" in res["throttle_reason"]
        again = agent.set_throughput(SetThroughput(job_id="j1", frac=1.0))
        assert again["frac"] == 1.0 and agent.jobs["j1"].throttle is runner.throttle
        with pytest.raises(RequestRefused, match="no job"):
            agent.set_throughput(SetThroughput(job_id="nope", frac=0.5))
        assert "set_throughput" in agent.handlers()
    finally:
        agent.shutdown()
    assert agent.jobs == {} and runner.throttle is None
