"""The typed agent client: one method per protocol command, same names and arguments as the
protocol's models, each answer parsed into its value (a short answer is an AgentError)."""

from __future__ import annotations

import inspect
import threading

import pytest

from testbed.agent.client import AgentClient, AgentError
from testbed.agent.protocol import COMMANDS
from testbed.agent.results import AgentInfo, Checkpoint, CheckpointSent, JobStatus, Resumed, ThroughputSet
from testbed.agent.server import ControlServer
from tests.unit.agent.test_agent_throughput import FakeJob

TOKEN = "t" * 32
STATUS = {"steps": 3, "paused": False, "done": False, "error": None, "throughput_frac": 1.0, "throttle": None}
SHA = "ab" * 32
TOP_UP = {"n_bytes": 100, "seconds": 0.01, "files": 1, "per_file_s": 0.002}
ANSWERS = {
    "ping": {"site": "a", "jobs": {"j1": STATUS}},
    "start_job": STATUS, "status": STATUS, "resume": STATUS,
    "losses": {"losses": [2.5, 2.25]},
    "checkpoint_and_pause": {"path": "/w/j1.pt", "size_bytes": 10, "sha256": SHA, "step": 3, "t_checkpoint_s": 0.1,
                             "t_pause_s": 0.01, "t_save_s": 0.09},
    "send_checkpoint": {"report": {"status": "completed"}, "checkpoint_bytes": 10, "ballast_bytes": 5,
                        "t_ballast_save_s": 0.05, "save_top_up": TOP_UP},
    "load_and_resume": {"t_load_s": 0.2, "step": 3, "bytes_read": 15, "t_persist_s": 0.01, "t_read_s": 0.02,
                        "t_deserialize_s": 0.1, "t_restore_s": 0.07, "load_top_up": TOP_UP},
    "free": {"freed": "j1"},
    "set_throughput": {"job_id": "j1", "frac": 0.5, "throttle": "duty-cycle", "throttle_reason": "no cgroup",
                       "quota_cores": None},
}


def test_every_command_has_one_method_with_the_protocols_arguments():
    for cmd, model in COMMANDS.items():
        method = getattr(AgentClient, cmd)
        params = [p for p in inspect.signature(method).parameters if p not in ("self", "timeout_s")]  # client-side
        assert sorted(params) == sorted(model.model_fields), cmd


@pytest.fixture
def served():
    got: list[tuple[str, dict]] = []
    answers = dict(ANSWERS)

    def handler(cmd):
        def h(args):
            got.append((cmd, args.model_dump(exclude_unset=True)))
            return answers[cmd]
        return h

    srv = ControlServer("127.0.0.1", 0, TOKEN, {c: handler(c) for c in COMMANDS})
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    client = AgentClient("127.0.0.1", srv.port, TOKEN)
    try:
        yield client, got, answers
    finally:
        client.close()
        srv.stop()


def test_each_method_sends_its_command_and_parses_the_answer(served):
    c, got, _ = served
    st = JobStatus(3, False, False, None, 1.0, None)
    assert c.ping() == AgentInfo("a", {"j1": st})
    assert c.start_job("j1", family="mlp", seed=7, steps_per_s=20.0) == st
    assert c.status("j1") == st and c.resume("j1") == st
    assert c.losses("j1") == [2.5, 2.25]
    assert c.checkpoint_and_pause("j1") == Checkpoint("/w/j1.pt", 10, SHA, 3, 0.1, 0.01, 0.09)
    sent = c.send_checkpoint("j1", dst_addr="10.0.0.2", dst_port=7000, ballast_bytes=5, transfer_id="m.j1.0")
    assert sent == CheckpointSent({"status": "completed"}, 10, 5, 0.05, TOP_UP)
    assert c.load_and_resume("j1", transfer_id="m.j1.0", sha256=SHA, steps_per_s=20.0) == Resumed(0.2, 3, 15, 0.01, 0.02, 0.1, 0.07, TOP_UP)
    assert c.free("j1") is None
    th = c.set_throughput("j1", frac=0.5, cap_w=150.0)
    assert isinstance(th, ThroughputSet) and (th.frac, th.throttle, th.throttle_reason) == (0.5, "duty-cycle", "no cgroup")
    assert got == [
        ("ping", {}), ("start_job", {"job_id": "j1", "family": "mlp", "seed": 7, "steps_per_s": 20.0}),
        ("status", {"job_id": "j1"}), ("resume", {"job_id": "j1"}), ("losses", {"job_id": "j1"}),
        ("checkpoint_and_pause", {"job_id": "j1"}),
        ("send_checkpoint", {"job_id": "j1", "dst_addr": "10.0.0.2", "dst_port": 7000, "ballast_bytes": 5,
                             "transfer_id": "m.j1.0"}),
        ("load_and_resume", {"job_id": "j1", "transfer_id": "m.j1.0", "sha256": SHA, "steps_per_s": 20.0}),
        ("free", {"job_id": "j1"}), ("set_throughput", {"job_id": "j1", "frac": 0.5, "cap_w": 150.0}),
    ]  # unset optional arguments are left to the agent's defaults


def test_a_short_answer_is_an_agent_error_naming_command_and_field(served):
    c, _, answers = served
    answers["checkpoint_and_pause"] = {"path": "/w/j1.pt", "size_bytes": 10}
    with pytest.raises(AgentError, match="bad answer to checkpoint_and_pause: no 'sha256'"):
        c.checkpoint_and_pause("j1")
    answers["losses"] = {}
    with pytest.raises(AgentError, match="bad answer to losses: no 'losses'"):
        c.losses("j1")


def test_a_refusal_is_the_agents_message(served):
    c, _, _ = served
    with pytest.raises(AgentError, match=r"args\.job_id"):
        c.status("../etc")


def test_the_parsers_read_a_real_agents_answers(tmp_path):
    """A real Agent behind the control server (a stand-in job: no torch): the typed answers parse."""
    from testbed.agent.agent import Agent
    from testbed.agent.runner import JobRunner

    agent = Agent("a", tmp_path, TOKEN)
    runner = JobRunner(FakeJob(), steps_per_s=200.0, max_steps=None)
    agent.jobs["j1"] = runner
    runner.start()
    srv = ControlServer("127.0.0.1", 0, TOKEN, agent.handlers())
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    c = AgentClient("127.0.0.1", srv.port, TOKEN)
    try:
        info = c.ping()
        assert info.site == "a" and set(info.jobs) == {"j1"} and isinstance(info.jobs["j1"], JobStatus)
        th = c.set_throughput("j1", frac=0.5, cap_w=200.0)
        assert (th.frac, th.throttle) == (0.5, "duty-cycle") and "no run id" in th.throttle_reason
        st = c.status("j1")
        assert st.throughput_frac == 0.5 and st.throttle == "duty-cycle" and st.error is None
        assert c.resume("j1").paused is False
        assert set(c.losses("j1")) <= {1.0}
        c.free("j1")
        with pytest.raises(AgentError, match="no job 'j1'"):
            c.status("j1")
    finally:
        c.close()
        srv.stop()
        agent.shutdown()


def test_a_long_command_waits_as_long_as_its_caller_sized_it():
    import time

    def slow(args):
        time.sleep(0.6)
        return ANSWERS["send_checkpoint"]

    srv = ControlServer("127.0.0.1", 0, TOKEN, {c: slow for c in COMMANDS})
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    client = AgentClient("127.0.0.1", srv.port, TOKEN, timeout_s=0.2)
    try:
        with pytest.raises(AgentError, match=r"no answer to send_checkpoint within 0.2 s"):
            client.send_checkpoint("j1", dst_addr="10.0.0.2", dst_port=1, transfer_id="x")
        sent = client.send_checkpoint("j1", dst_addr="10.0.0.2", dst_port=1, transfer_id="x", timeout_s=5.0)
        assert sent.ballast_bytes == 5
        with pytest.raises(AgentError, match="within 0.2 s"):  # the longer wait was for that call only
            client.status("j1")
    finally:
        client.close()
        srv.stop()


def test_the_wait_for_a_transfer_grows_with_its_bytes_and_the_links_slowness():
    from testbed.netem.plan import LinkPlan
    from testbed.substrate.emulated.agent_mover import SEND_FIXED_S, send_wait_s

    def link(a, b, ab, ba):
        return LinkPlan(index=0, key=f"{a}-{b}", a=a, b=b, rate_ab_mbit=ab, rate_ba_mbit=ba, delay_ms=0.0,
                        jitter_ms=0.0, loss_pct=0.0, if_a="", if_b="", addr_a="", addr_b="")

    fast, other = link("x", "y", 1000.0, 10.0), link("y", "z", 5.0, 5.0)

    class Plan:
        links = [fast, other]

        def link(self, a, b):
            for lk in self.links:
                if {lk.a, lk.b} == {a, b}:
                    return lk
            raise KeyError(f"{a}-{b}")

    plan = Plan()
    small, big = send_wait_s(1e6, plan, "x", "y"), send_wait_s(1e9, plan, "x", "y")
    assert SEND_FIXED_S < small < big
    assert big > 10 * 8.0  # 1 GB at 1000 Mbit/s is 8 s on the wire: ten times that, at least
    assert send_wait_s(1e9, plan, "y", "x") > 10 * 800.0  # the other direction runs at 10 Mbit/s
    assert send_wait_s(1e8, plan, "x", "z") > 10 * 160.0  # no direct link: the slowest one bounds it
