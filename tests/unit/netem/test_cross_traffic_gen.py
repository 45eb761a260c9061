"""The cross-traffic generator on loopback (no namespaces, no root): every kind of load sends, the
sink counts it, counters are written, SIGTERM ends both."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

from testbed.netem.crosstraffic import flows_of, plan_cross_traffic, read_stats, sender_spec
from testbed.spec.cross_traffic import CrossTraffic


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(argv, tmp, name):
    ready, log = tmp / f"{name}.ready", tmp / f"{name}.log"
    with open(log, "w") as err:
        p = subprocess.Popen([sys.executable, "-m", "testbed.netem.xtgen", *argv, "--stats",
                              str(tmp / f"{name}.json"), "--ready", str(ready)], stderr=err)
    deadline = time.monotonic() + 10
    while not ready.exists():
        assert p.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.02)
    return p


def test_plan_scales_rates_sizes_and_arrivals(tmp_path):
    (tmp_path / "t.csv").write_text("t_s,flows,udp_gbps\n0,1,0.1\n60,2,0\n")
    e = CrossTraffic(src="a", dst="b", tcp={"flows": 2}, udp={"rate_gbps": 1.0},
                     on_off={"flows": 3, "on_s": 10, "off_s": 20},
                     poisson={"arrivals_per_s": 2, "mean_size_mb": 100, "max_flows": 5}, trace=str(tmp_path / "t.csv"))
    (xt,) = plan_cross_traffic([e], time_scale=10, byte_scale=0.01, seed=3)
    spec = json.loads(xt.spec)
    assert spec["udp_bps"] == 1e9 * 0.01 * 10
    assert spec["poisson"] == {"rate_per_wall_s": 20, "mean_bytes": 1e6, "shape": 1.5, "max_flows": 5}
    assert spec["trace"]["udp_bps"] == [0.1e9 * 0.1, 0.0] and spec["trace"]["flows"] == [1, 2]
    assert len(spec["on_off"]["phases_s"]) == 3
    assert flows_of(xt) == 2 + 3 + 5 + 2
    s = json.loads(sender_spec(xt, "10.0.0.2", "bbr"))
    assert s["dst"] == "10.0.0.2" and s["congestion"] == "bbr"
    assert "congestion" not in json.loads(sender_spec(xt, "10.0.0.2", "host")) or \
        json.loads(sender_spec(xt, "10.0.0.2", "host"))["congestion"] is None
    assert "2 TCP flow(s)" in xt.summary and "Poisson" in xt.summary


def test_every_kind_sends_and_sigterm_ends_it(tmp_path):
    port = _free_port()
    (tmp_path / "t.csv").write_text("t_s,flows\n0,1\n")
    e = CrossTraffic(src="a", dst="b", tcp={"flows": 2}, udp={"rate_gbps": 0.01},
                     on_off={"flows": 2, "on_s": 0.2, "off_s": 0.2},
                     poisson={"arrivals_per_s": 20, "mean_size_mb": 0.1}, trace=str(tmp_path / "t.csv"))
    (xt,) = plan_cross_traffic([e])
    sink = _start(["sink", "--port", str(port)], tmp_path, "sink")
    try:
        spec = json.loads(xt.spec)
        spec.update(dst="127.0.0.1", port=port)
        send = _start(["send", "--spec", json.dumps(spec)], tmp_path, "send")
        try:
            time.sleep(1.5)
            st = read_stats(tmp_path / "send.json")
            assert st["tcp_bytes"] > 0 and st["udp_bytes"] > 0 and st["errors"] == 0, st
            assert st["flows_started"] > 2 + 1  # the bulk and trace flows, then on/off and Poisson ones
        finally:
            send.terminate()
            assert send.wait(10) == 0
    finally:
        sink.terminate()
        assert sink.wait(10) == 0
    got = read_stats(tmp_path / "sink.json")
    assert got["tcp_bytes"] > 0 and got["udp_bytes"] > 0


def test_schedules_follow_the_runs_clock_file(tmp_path):
    from testbed.netem.xtgen import Counters, Sender
    from testbed.netem.crosstraffic import write_clock

    clock = tmp_path / "clock.json"
    s = Sender({"dst": "127.0.0.1", "port": 1, "time_scale": 100.0, "clock_file": str(clock)}, Counters())
    assert s.traffic_s() < 1.0  # no file yet: its own clock from its start
    write_clock(str(clock), 3600.0)
    s._clock_read = -1e9
    assert 3600.0 <= s.traffic_s() < 3600.0 + 100.0 * 0.5
    time.sleep(0.06)
    write_clock(str(clock), 7200.0)  # the run's clock skipped idle time
    assert 7200.0 <= s.traffic_s() < 7200.0 + 100.0 * 0.5
    alone = Sender({"dst": "127.0.0.1", "port": 1, "time_scale": 10.0}, Counters())
    time.sleep(0.05)
    assert 0.4 <= alone.traffic_s() < 5.0
