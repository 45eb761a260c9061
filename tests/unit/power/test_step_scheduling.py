"""A control step that costs what it must (issue #34): the agents' cap path sends only what changed,
in one concurrent round trip, never sleeps, and files each step's measurement when it has one; the
step profile's parts are exclusive and add up; the path before (poll) is still there for the bench."""

from __future__ import annotations

import math
import threading
import time
from types import SimpleNamespace

import pytest

from testbed import step_profile
from testbed import errors
from testbed.power.throttle import agent_throttle
from testbed.power.throttle.agent_throttle import MIN_INTERVALS, READ_EVERY_S, AgentThrottleCaps
from testbed.power.caps import CapEnforcer, Enforcement, JobCap, Throttled
from testbed.power.gpu.profile import PowerProfile, ProfilePoint

PROFILE = PowerProfile("toy", 100.0, 300.0, 300.0, 20.0,
                       (ProfilePoint(100, 0.5, 100), ProfilePoint(200, 0.8, 180), ProfilePoint(300, 1.0, 250)),
                       source="test")


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


class BatchPort:
    """A throughput port with the batch method: records each batch; every job's window is what
    ``windows`` says (requested frac, intervals, enforced frac) at the time of the call."""

    def __init__(self):
        self.batches: list[list[tuple[str, str, float, float]]] = []
        self.singles: list[tuple] = []
        self.frac: dict[str, float] = {}
        self.intervals: dict[str, int] = {}
        self.enforced: dict[str, float] = {}
        self.refuse: set[str] = set()

    def job_site(self, job_id: str, site: str) -> str:
        return site

    def _answer(self, job_id: str, frac: float):
        if job_id in self.refuse:
            return errors.TestbedError(f"no job {job_id!r}")
        prev = self.frac.get(job_id)
        window = None if prev is None else {
            "requested_frac": prev, "window_intervals": self.intervals.get(job_id, 0), "training": True,
            "enforced_frac": self.enforced.get(job_id) if self.intervals.get(job_id, 0) else None,
            "measured_steps_per_s": 1.0, "window_s": 2.0}
        if prev != frac:  # a new cap: a new window
            self.intervals[job_id] = 0
        self.frac[job_id] = frac
        return Throttled(frac, "cgroup-v1", "", window)

    def set_throughput(self, job_id, site, frac, cap_w):
        self.singles.append((job_id, site, frac, cap_w))
        res = self._answer(job_id, frac)
        if isinstance(res, Exception):
            raise res
        return res

    def set_throughputs(self, requests):
        self.batches.append(list(requests))
        return {job_id: self._answer(job_id, frac) for job_id, site, frac, cap_w in requests}


def _cap(site: str, frac: float) -> JobCap:
    return JobCap(site, 100 + 200 * frac, frac, 100 + 150 * frac)


def _event(port, clock):
    return AgentThrottleCaps(port, {"a": PROFILE, "b": PROFILE}, mode="event", clock=clock)


def test_only_changed_caps_are_sent_in_one_round_trip_and_unchanged_steps_cost_none():
    port, clock = BatchPort(), Clock()
    caps = _event(port, clock)
    caps.apply(0.0, {"j1": _cap("a", 0.5), "j2": _cap("a", 0.8), "j3": _cap("b", 0.6)})
    assert len(port.batches) == 1 and sorted(r[0] for r in port.batches[0]) == ["j1", "j2", "j3"]
    assert caps.settle_steps(0.0, 300.0) == []  # nothing measured yet, nothing asked
    for k in range(1, 20):  # nothing changes: no round trip at all, the measurement is deferred
        clock.t += 0.001
        caps.apply(300.0 * k, {"j1": _cap("a", 0.5), "j2": _cap("a", 0.8), "j3": _cap("b", 0.6)})
        assert caps.settle_steps(300.0 * k, 300.0 * (k + 1)) == []
    assert len(port.batches) == 1 and port.singles == []
    # j2's cap changes: only j2 is sent; the answer is its old window's reading, filed for all 20 steps
    port.intervals["j2"], port.enforced["j2"] = 6, 0.79
    caps.apply(6000.0, {"j1": _cap("a", 0.5), "j2": _cap("a", 0.4), "j3": _cap("b", 0.6)})
    assert len(port.batches) == 2 and [r[0] for r in port.batches[1]] == ["j2"]
    rows = caps.settle_steps(6000.0, 6300.0)
    assert sorted(t for t, j, _ in rows if j == "j2") == [300.0 * k for k in range(20)]
    assert {j for _, j, _ in rows} == {"j2"}
    enf = rows[0][2]
    assert enf.throughput_frac == pytest.approx(0.79) and enf.power_basis == "derived"
    assert enf.power_w == pytest.approx(PROFILE.draw_at_frac_w(0.79))


def test_a_deferred_window_is_reread_after_its_time_and_kept_until_it_has_enough_intervals():
    port, clock = BatchPort(), Clock()
    caps = _event(port, clock)
    caps.apply(0.0, {"j1": _cap("a", 0.5), "j3": _cap("b", 0.6)})
    clock.t += READ_EVERY_S  # in force long enough: one concurrent re-read of both, in one round trip
    port.intervals.update(j1=MIN_INTERVALS - 1, j3=MIN_INTERVALS)
    port.enforced.update(j1=0.4, j3=0.61)
    rows = caps.settle_steps(0.0, 300.0)
    assert len(port.batches) == 2 and sorted(r[0] for r in port.batches[1]) == ["j1", "j3"]
    assert [(t, j) for t, j, _ in rows] == [(0.0, "j3")]  # j1: too few intervals yet, still pending
    assert rows[0][2].throughput_frac == pytest.approx(0.61)
    caps.apply(300.0, {"j1": _cap("a", 0.5), "j3": _cap("b", 0.6)})
    assert caps.settle_steps(300.0, 600.0) == [] and len(port.batches) == 2  # j1 was just read: not due
    # the run's last step: everything pending is read and filed, whatever it has (j1 training with
    # too few intervals is waited for, at most settle_wait_s)
    caps.settle_wait_s = 0.1
    rows = caps.settle_steps(300.0, 600.0, final=True)
    assert sorted((t, j) for t, j, _ in rows) == [(0.0, "j1"), (300.0, "j1"), (300.0, "j3")]
    assert all(e.throughput_frac is not None for _, _, e in rows)


def test_a_window_too_short_to_show_an_interval_is_measured_with_the_span_that_follows():
    """Windows of milliseconds (the clock jumped): their steps take the achieved / requested ratio of
    the job's next windows, summed until they show MIN_INTERVALS intervals, times their own frac."""
    port, clock = BatchPort(), Clock()
    caps = _event(port, clock)
    caps.apply(0.0, {"j1": _cap("a", 0.5)})
    caps.apply(300.0, {"j1": _cap("a", 0.8)})  # the 0.5 window ended with no interval
    assert caps.settle_steps(300.0, 600.0) == []
    port.intervals["j1"], port.enforced["j1"] = 2, 0.72  # 2 intervals at 0.8: still too few (span 2 < 4)
    caps.apply(600.0, {"j1": _cap("a", 0.6)})
    assert caps.settle_steps(600.0, 900.0) == []
    port.intervals["j1"], port.enforced["j1"] = 3, 0.5   # + 3 at 0.6: the span has 5 intervals
    caps.apply(900.0, {"j1": _cap("a", 0.7)})
    rows = sorted(caps.settle_steps(900.0, 1200.0))
    ratio = (2 + 3) / (0.8 * 2 / 0.72 + 0.6 * 3 / 0.5)
    assert [t for t, _, _ in rows] == [0.0, 300.0, 600.0]
    assert [e.throughput_frac for _, _, e in rows] == pytest.approx([0.5 * ratio, 0.8 * ratio, 0.6 * ratio])
    # a lone window's span is that window's own enforced fraction
    port.intervals["j1"], port.enforced["j1"] = 8, 0.66
    caps.apply(1200.0, {"j1": _cap("a", 0.4)})
    assert [(t, e.throughput_frac) for t, _, e in caps.settle_steps(1200.0, 1500.0)] == [(900.0, pytest.approx(0.66))]


def test_the_last_step_waits_once_for_a_training_jobs_intervals_then_files_everything(monkeypatch):
    port, clock = BatchPort(), Clock()
    caps = _event(port, clock)
    caps.settle_wait_s = 0.3
    caps.apply(0.0, {"j1": _cap("a", 0.5)})
    t0 = time.monotonic()
    rows = caps.settle_steps(0.0, 300.0, final=True)  # never shows an interval: waits 0.3 s, then NaN
    assert 0.25 < time.monotonic() - t0 < 1.0 and len(port.batches) > 3
    assert [(t, j, e.throughput_frac) for t, j, e in rows] == [(0.0, "j1", None)]


def test_a_job_that_leaves_gets_its_last_reading_or_an_honest_nan():
    port, clock = BatchPort(), Clock()
    caps = _event(port, clock)
    caps.apply(0.0, {"j1": _cap("a", 0.5), "j2": _cap("a", 0.7)})
    clock.t += READ_EVERY_S
    port.intervals["j1"], port.enforced["j1"] = 2, 0.45  # read, too few intervals: kept, its reading remembered
    assert [j for _, j, _ in caps.settle_steps(0.0, 300.0)] == []
    caps.settle_wait_s = 0.2
    t0 = time.monotonic()
    caps.leaving(300.0, ["j1", "j2"], finished=True)  # both finished: read once more, then filed ...
    assert sorted(r[0] for r in port.batches[2]) == ["j1", "j2"]
    # ... j2, never measured, re-read alone until it shows an interval (it never does here): 0.2 s at most
    assert len(port.batches) > 3 and all([r[0] for r in b] == ["j2"] for b in port.batches[3:])
    assert 0.15 < time.monotonic() - t0 < 1.0
    caps.apply(300.0, {})
    rows = {(t, j): e for t, j, e in caps.settle_steps(300.0, 600.0)}
    assert rows[(0.0, "j1")].throughput_frac == pytest.approx(0.45)
    assert rows[(0.0, "j2")].throughput_frac is None and rows[(0.0, "j2")].power_basis == "derived"


def test_a_migrating_job_is_read_before_it_leaves_and_its_span_goes_on_at_the_destination():
    port, clock = BatchPort(), Clock()
    caps = _event(port, clock)
    caps.apply(0.0, {"j1": _cap("a", 0.5)})
    port.intervals["j1"], port.enforced["j1"] = 1, 0.5
    caps.leaving(300.0, ["j1"], finished=False)  # read at the source while it still trains there
    assert [r[:3] for r in port.batches[-1]] == [("j1", "a", 0.5)]
    caps.apply(300.0, {})  # migrating: no caps, nothing filed yet (1 interval < MIN_INTERVALS)
    assert caps.settle_steps(300.0, 600.0) == []
    port.frac.pop("j1")  # a fresh job at the destination
    caps.apply(600.0, {"j1": _cap("b", 0.8)})
    port.intervals["j1"], port.enforced["j1"] = 3, 0.8
    rows = caps.settle_steps(600.0, 900.0, final=True)
    ratio = (1 + 3) / (0.5 * 1 / 0.5 + 0.8 * 3 / 0.8)
    assert sorted((t, e.throughput_frac) for t, _, e in rows) == [(0.0, pytest.approx(0.5 * ratio)),
                                                                   (600.0, pytest.approx(0.8 * ratio))]


def test_event_mode_never_sleeps_and_poll_mode_is_the_path_before(monkeypatch):
    slept = []
    monkeypatch.setattr(agent_throttle.time, "sleep", lambda s: slept.append(s))
    port = BatchPort()
    caps = _event(port, time.monotonic)
    for k in range(5):
        caps.apply(300.0 * k, {"j1": _cap("a", 0.5)})
        caps.settle_steps(300.0 * k, 300.0 * (k + 1))
    assert slept == []
    # poll: each step asks every job, one call each (no batch), and polls with sleeps for intervals
    port = BatchPort()
    caps = AgentThrottleCaps(port, {"a": PROFILE}, mode="poll")
    caps.settle_wait_s = 0.2
    caps.apply(0.0, {"j1": _cap("a", 0.5), "j2": _cap("a", 0.6)})
    rows = caps.settle_steps(0.0, 300.0)
    assert port.batches == [] and len(port.singles) > 4 and slept  # re-asked while too few intervals
    assert sorted(j for _, j, _ in rows) == ["j1", "j2"]
    n = len(port.singles)
    caps.apply(300.0, {"j1": _cap("a", 0.5), "j2": _cap("a", 0.6)})
    port.intervals.update(j1=MIN_INTERVALS, j2=MIN_INTERVALS)
    caps.settle_steps(300.0, 600.0)
    assert len(port.singles) == n + 2  # unchanged caps are still read every step


def test_the_default_mode_is_event_and_a_bad_mode_is_refused():
    assert agent_throttle.DEFAULT_MODE == "event" and AgentThrottleCaps(BatchPort()).mode == "event"
    with pytest.raises(ValueError, match="mode"):
        AgentThrottleCaps(BatchPort(), mode="fast")


def test_a_refused_cap_is_an_error_of_the_step():
    port, clock = BatchPort(), Clock()
    port.refuse.add("j1")
    with pytest.raises(errors.TestbedError, match="no job 'j1'"):
        _event(port, clock).apply(0.0, {"j1": _cap("a", 0.5)})


def test_the_default_settle_steps_files_settle_under_this_step():
    class Once(CapEnforcer):
        def apply(self, t_s, caps):
            return {}

        def settle(self, t_s):
            return {"j": Enforcement(0.5, 10.0, "model")}

    assert Once().settle_steps(300.0, 600.0) == [(300.0, "j", Enforcement(0.5, 10.0, "model"))]


# --- the agents asked concurrently -------------------------------------------------------------
def test_map_sites_asks_the_agents_concurrently_in_their_order():
    from testbed.substrate.emulated.agents import AgentPool

    pool = AgentPool.__new__(AgentPool)
    pool._executor = None
    pool.fabric = SimpleNamespace(plan=SimpleNamespace(sites=["a", "b", "c"]))
    threads = set()

    def slow(site):
        threads.add(threading.get_ident())
        time.sleep(0.3)
        return site.upper()

    with step_profile.profiling() as prof:
        prof.begin_run("netns", "p")
        assert pool.map_sites(slow, ["a"]) == ["A"]  # one site: on this thread; outside a step: not timed
        threads.clear()
        t0 = time.perf_counter()
        prof.step_start()
        got = pool.map_sites(slow, ["c", "a", "b"])
        prof.step_done()
        took = time.perf_counter() - t0
    pool._executor.shutdown()
    assert got == ["C", "A", "B"] and len(threads) == 3
    assert took < 0.6, took  # one after another would take 0.9 s
    run = prof.runs[-1]
    assert (run.rpcs, run.round_trips) == (3, 1) and run.seconds["rpc"] == pytest.approx(took, abs=0.05)


# --- the step profile ---------------------------------------------------------------------------
def test_parts_are_exclusive_and_other_threads_are_not_the_step():
    with step_profile.profiling() as prof:
        prof.begin_run("netns", "p")
        prof.step_start()
        with step_profile.part("caps"):
            time.sleep(0.05)
            with step_profile.part("rpc"):
                time.sleep(0.1)
        th = threading.Thread(target=lambda: step_profile.part("rpc").__enter__())
        th.start()
        th.join()
        with step_profile.part("sleep"):
            time.sleep(0.05)
        time.sleep(0.05)  # in no part: other
        prof.step_done()
    assert step_profile.active() is None  # profiling ended with the block
    s = prof.runs[-1].summary()
    assert s["parts_s"]["rpc"] == pytest.approx(0.1, abs=0.03) and s["parts_s"]["caps"] == pytest.approx(0.05, abs=0.03)
    assert s["other_s"] == pytest.approx(0.05, abs=0.03) and s["steps"] == 1
    assert s["wall_over_work"] == pytest.approx(s["wall_s"] / (s["parts_s"]["rpc"] + s["parts_s"]["caps"]))
    assert s["parts_over_wall"] < 1.0 and s["steps_without_round_trip"] == 1
    assert step_profile.part("rpc") is not None  # without a profile: a no-op context


def test_the_controller_files_a_deferred_measurement_under_its_own_step():
    """An enforcer that measures step k only at step k + 2: power.parquet has it in step k's row."""
    from testbed.controller.controller import Controller
    from testbed.inputs import build_inputs
    from testbed.policies import make_policy
    from testbed.power.caps import CapReport
    from testbed.spec import scenario_from_dict
    from testbed.substrate.sim import SimSubstrate
    from tests.conftest import small_scenario_dict

    class Late(CapEnforcer):
        name = "late"

        def __init__(self):
            self.steps: list[tuple[float, list[str]]] = []

        def apply(self, t_s, caps):
            self.steps.append((t_s, list(caps)))
            return {j: CapReport(c.cap_w, c.throughput_frac, "late") for j, c in caps.items()}

        def settle_steps(self, t0_s, t1_s, final=False):
            due = self.steps if final else self.steps[:-2]
            self.steps = [] if final else self.steps[-2:]
            return [(t, j, Enforcement(0.123, 42.0, "derived")) for t, jobs in due for j in jobs]

    sc = scenario_from_dict(small_scenario_dict(duration_h=6, policies=["static"]))
    inputs = build_inputs(sc, None)
    with SimSubstrate(inputs) as sub:
        tables = Controller(inputs, make_policy(sc.policies[0], sc), sub, caps=Late()).run().tables()
    p = tables["power"]
    assert len(p) > 10 and (p["throughput_frac_enforced"] == 0.123).all() and (p["gpu_power_w"] == 42.0).all()
    assert not math.isnan(p["gpu_power_w"].sum())


# --- set_throughputs: several jobs in one command, at a real agent --------------------------------
def test_set_throughputs_sets_each_job_and_refuses_a_missing_one_alone(tmp_path):
    from testbed.agent.agent import Agent
    from testbed.agent.client import AgentClient, AgentError
    from testbed.agent.runner import JobRunner
    from testbed.agent.server import ControlServer
    from tests.unit.agent.test_agent_throughput import FakeJob

    token = "t" * 32
    agent = Agent("a", tmp_path, token)
    for j in ("j1", "j2"):
        agent.jobs[j] = JobRunner(FakeJob(), steps_per_s=200.0, max_steps=None)
        agent.jobs[j].start()
    srv = ControlServer("127.0.0.1", 0, token, agent.handlers())
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    c = AgentClient("127.0.0.1", srv.port, token)
    try:
        got = c.set_throughputs([("j1", 0.5, 200.0), ("nope", 0.4, None), ("j2", 0.7, 250.0)])
        assert [type(g).__name__ for g in got] == ["ThroughputSet", "AgentError", "ThroughputSet"]
        assert (got[0].frac, got[2].frac) == (0.5, 0.7) and "no job 'nope'" in str(got[1])
        assert agent.jobs["j1"].throughput_frac == 0.5 and agent.jobs["j2"].throughput_frac == 0.7
        assert "window" in got[0].details  # what the setting before achieved, as set_throughput answers
        with pytest.raises(AgentError, match=r"set_throughputs: args\.items"):
            c.set_throughputs([])
    finally:
        c.close()
        srv.stop()
        agent.shutdown()


# --- the bench's tables ---------------------------------------------------------------------------
def test_the_bench_compares_the_paths_and_writes_its_tables():
    from testbed.bench.emulation import compare_modes, markdown
    from testbed.step_profile import RunProfile, summarize

    def run(mode, wall, migrations, rnd):
        prof = RunProfile("netns", "static")
        prof.step_walls, prof.step_rpcs, prof.rpcs, prof.round_trips = [wall / 10] * 10, [1] * 10, 10, 10
        prof.seconds["rpc"] = wall / 2
        return {"case": f"netns/agents/{mode}", "substrate": "netns", "nodes": "agents", "mode": mode, "round": rnd,
                "total_wall_s": wall, "steps": summarize([prof]),
                "outcomes": {"static": {"migrations": migrations, "total_kwh": 70.0 + rnd, "decisions": 12}}}

    results = [run("poll", 420.0, 3, 1), run("event", 100.0, 3, 1), run("poll", 440.0, 4, 2), run("event", 110.0, 3, 2)]
    (m,) = compare_modes(results)
    assert m["speedup"] == pytest.approx(430.0 / 105.0) and m["event_within_target"]
    assert m["outcomes"]["static"]["migrations"]["poll"] == {"n": 2, "mean": 3.5, "min": 3.0, "max": 4.0}
    text = markdown({"scenario": "q", "host": {"cores": 2, "kernel": "k", "loadavg_1_5_15": [1, 1, 1],
                                               "loadavg_at_end": [2, 2, 2]},
                     "target_wall_s": 150.0, "runs": results, "modes": [m]})
    assert "x 4.10 faster" in text and "| static | migrations | 3.5 [3, 4] | 3 |" in text
    assert "| netns/agents/poll | 1 | 420.0 | 10 | 42000.0 | 21000.0 |" in text
