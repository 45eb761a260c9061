"""The cross-traffic generator's schedules follow the run's clock file across a jump (the emulated
clock skips idle time), and a congestion control that cannot be set is an error counted once, not a
retry loop; no root, no namespace (a fake clock file, fake or loopback flows)."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

from testbed.netem import xtgen
from testbed.netem.crosstraffic import write_clock
from testbed.netem.xtgen import Counters, Sender

REACT_S = 0.15
"""How soon (wall seconds) a schedule must act on a jump of the clock file: the generator re-reads it
every 10 ms and no schedule sleeps past a change (before: a trace slept up to 0.5 s, an on/off flow's
off period as long as the schedule said)."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_schedules_at_a_time():
    assert [xtgen.trace_flows_at([0, 300, 600], [1, 0, 3], t) for t in (-5, 0, 299.9, 300, 21300)] == [1, 1, 1, 0, 3]
    assert [xtgen.trace_next_s([0, 300], t) for t in (0, 299, 300, 5000)] == [300, 300, None, None]
    # flow k on while (t + phase_k) mod (on + off) < on: period 1100, on 100
    assert [xtgen.on_off_flows_at([200.0], 100, 1000, t) for t in (0, 899, 900, 999, 1000)] == [0, 0, 1, 1, 0]
    assert xtgen.on_off_flows_at([0.0, 50.0, 600.0], 100, 1000, 10) == 2
    assert xtgen.on_off_next_s([200.0], 100, 1000, 0) == 900 and xtgen.on_off_next_s([200.0], 100, 1000, 900) == 1000
    assert xtgen.on_off_next_s([200.0, 0.0], 100, 1000, 0) == 100


class _FakeFlows:
    """Sender.flow without a network: a flow is open until its schedule cancels it."""

    def __init__(self, monkeypatch):
        async def flow(sender, cc, size=None, **_):
            sender.c.flows += 1
            sender.c.flows_started += 1
            try:
                await asyncio.Event().wait()
            finally:
                sender.c.flows -= 1

        monkeypatch.setattr(Sender, "flow", flow)


async def _until(cond, limit_s: float) -> float:
    """Wall seconds until ``cond()`` holds (inf after ``limit_s``)."""
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > limit_s:
            return float("inf")
        await asyncio.sleep(0.002)
    return time.monotonic() - t0


def _sender(tmp_path, **spec) -> Sender:
    return Sender({"dst": "127.0.0.1", "port": 9, "time_scale": 1.0, "clock_file": str(tmp_path / "clock.json"),
                   **spec}, Counters())


def test_a_trace_ends_its_flows_when_the_clock_jumps_past_its_end(tmp_path, monkeypatch):
    """The tester's case: trace 0 -> 1 flow, 300 -> 0 flows; the run's clock jumps from 0 to 21300
    (idle time skipped). At time_scale 1 its own extrapolation would take 300 wall seconds."""
    _FakeFlows(monkeypatch)
    clock = str(tmp_path / "clock.json")
    write_clock(clock, 0.0)
    s = _sender(tmp_path, trace={"times_s": [0, 300], "flows": [1, 0], "udp_bps": [0, 0]})

    async def go():
        task = asyncio.create_task(s.run())
        assert await _until(lambda: s.c.flows == 1, 1.0) < 1.0
        await asyncio.sleep(0.1)
        write_clock(clock, 21300.0)
        took = await _until(lambda: s.c.flows == 0, 2.0)
        task.cancel()
        return took

    took = asyncio.run(go())
    assert took < REACT_S, f"the trace's flow ended {took:.3f} s after the jump"
    assert s.c.flows_started == 1 and s.c.flows_wanted == 1


def test_on_off_flows_follow_jumps_into_and_out_of_their_on_periods(tmp_path, monkeypatch):
    """One on/off flow, on 100 s, off 1000 s, off at t = 0 for 900 s: a jump into its on period
    starts it, a jump out of it ends it, a jump over a whole on period (on and off again inside the
    skipped time) starts nothing."""
    _FakeFlows(monkeypatch)
    clock = str(tmp_path / "clock.json")
    write_clock(clock, 0.0)
    s = _sender(tmp_path, on_off={"on_s": 100, "off_s": 1000, "phases_s": [200.0]})

    async def go():
        task = asyncio.create_task(s.run())
        await asyncio.sleep(0.1)
        assert s.c.flows == 0
        write_clock(clock, 950.0)  # on (position 50 of 100)
        on = await _until(lambda: s.c.flows == 1, 2.0)
        await asyncio.sleep(0.05)
        write_clock(clock, 1000.0)  # off again (position 100)
        off = await _until(lambda: s.c.flows == 0, 2.0)
        started = s.c.flows_started
        write_clock(clock, 1000.0 + 1100 + 500)  # the next on period (1800-1900) lies inside the skip
        await asyncio.sleep(0.1)
        task.cancel()
        return on, off, started

    on, off, started = asyncio.run(go())
    assert on < REACT_S and off < REACT_S, (on, off)
    assert started == 1 and s.c.flows_started == 1 and s.c.flows == 0


def test_no_schedule_sleeps_long_without_a_clock_file(tmp_path, monkeypatch):
    """``testbed net up``: no clock file, the generator's own clock; a schedule still wakes every
    SCHEDULE_MAX_SLEEP_S (at time_scale 1000 an on period of 0.2 wall seconds starts on time)."""
    _FakeFlows(monkeypatch)
    s = Sender({"dst": "127.0.0.1", "port": 9, "time_scale": 1000.0,
                "on_off": {"on_s": 200, "off_s": 1e6, "phases_s": [1e6 + 200 - 300.0]}}, Counters())

    async def go():
        task = asyncio.create_task(s.run())
        took = await _until(lambda: s.c.flows == 1, 2.0)  # on from t = 300 (0.3 wall s)
        task.cancel()
        return took

    assert 0.25 < asyncio.run(go()) < 0.3 + REACT_S


def test_real_flows_on_loopback_end_at_once_on_a_jump(tmp_path):
    """Real sockets: the trace's flow to a loopback sink is reset when the clock jumps past its end,
    and the sink receives nothing more from it."""
    clock = str(tmp_path / "clock.json")
    write_clock(clock, 0.0)
    port = _free_port()
    sink = Counters()

    async def receive(reader, writer):
        sink.flows += 1
        try:
            while data := await reader.read(1 << 18):
                sink.tcp_bytes += len(data)
        except ConnectionError:
            pass
        finally:
            sink.flows -= 1
            writer.close()
    s = Sender({"dst": "127.0.0.1", "port": port, "time_scale": 1.0, "clock_file": clock,
                "trace": {"times_s": [0, 300], "flows": [1, 0], "udp_bps": [0, 0]}}, Counters())

    async def go():
        from concurrent.futures import ThreadPoolExecutor

        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=8))
        server = await asyncio.start_server(receive, "127.0.0.1", port)
        task = asyncio.create_task(s.run())
        assert await _until(lambda: sink.tcp_bytes > 0 and s.c.flows == 1, 5.0) < 5.0
        write_clock(clock, 21300.0)
        took = await _until(lambda: s.c.flows == 0, 2.0)
        await asyncio.sleep(0.05)
        got = sink.tcp_bytes
        await asyncio.sleep(0.2)
        task.cancel()
        server.close()
        await server.wait_closed()
        return took, got, sink.tcp_bytes, sink.flows

    took, got, later, open_at_sink = asyncio.run(go())
    assert took < REACT_S, took
    assert later == got and open_at_sink == 0  # the connection is gone, nothing more arrived
    assert s.c.errors == 0, s.c.last_error  # ended by its schedule: no error


def test_a_congestion_control_that_cannot_be_set_is_one_error_per_flow_not_a_retry_loop():
    """setsockopt(TCP_CONGESTION) fails for a name the kernel lacks: each flow counts it once and
    opens nothing (before: `_retrying` tried again every 0.2 s for ever)."""
    s = Sender({"dst": "127.0.0.1", "port": _free_port(), "tcp_flows": 2, "congestion": "nosuchcc"}, Counters())

    async def go():
        task = asyncio.create_task(s.run())
        await asyncio.sleep(0.7)
        task.cancel()

    asyncio.run(go())
    assert s.c.errors == 2 and "nosuchcc" in s.c.last_error, (s.c.errors, s.c.last_error)
    assert s.c.flows_started == 0 and s.c.flows_wanted == 2


@pytest.mark.parametrize("bad", [0, 1])
def test_an_entrys_congestion_control_is_checked_against_the_machine_before_any_fabric(monkeypatch, bad):
    from testbed.errors import SpecError
    from testbed.netem import tcp_cc
    from testbed.netem.crosstraffic import plan_cross_traffic
    from testbed.spec.cross_traffic import CrossTraffic

    monkeypatch.setattr(tcp_cc, "available", lambda: ["reno", "cubic"])
    entries = [CrossTraffic(src="a", dst="b", tcp={"flows": 1, "congestion": "reno"}),
               CrossTraffic(src="b", dst="a", tcp={"flows": 2, "congestion": "cubic"}, on_off={"flows": 1, "on_s": 1, "off_s": 1})]
    assert len(plan_cross_traffic(entries)) == 2
    entries[bad] = CrossTraffic(src="a", dst="b", tcp={"flows": 2, "congestion": "nosuchcc"})
    with pytest.raises(SpecError) as e:
        plan_cross_traffic(entries)
    assert e.value.problems[0][0] == f"cross_traffic[{bad}].tcp.congestion" and "nosuchcc" in e.value.problems[0][1]


def test_host_means_the_machines_default_for_an_entry(monkeypatch):
    import json

    from testbed.netem import tcp_cc
    from testbed.netem.crosstraffic import plan_cross_traffic
    from testbed.spec.cross_traffic import CrossTraffic

    monkeypatch.setattr(tcp_cc, "host_default", lambda: "reno")
    (xt,) = plan_cross_traffic([CrossTraffic(src="a", dst="b", tcp={"flows": 1, "congestion": "host"})])
    assert json.loads(xt.spec)["congestion"] == "reno"  # never the name "host" on a socket
