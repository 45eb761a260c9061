"""The compiled relay's launcher: argument building, build detection, the build itself and the
binary's refusal of malformed arguments (no privileges needed)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from testbed.netem.relay import fastrelay
from testbed.netem.relay.fastrelay import FastRelayBuildError, LinkArg, available, build, fastrelay_argv

needs_cc = pytest.mark.skipif(fastrelay.compiler() is None, reason="no C compiler")


def _link(**kw) -> LinkArg:
    base = dict(if_a="ra", if_b="rb", delay_ab_ms=25, jitter_ab_ms=1, loss_ab_pct=0.5, delay_ba_ms=10,
                jitter_ba_ms=0, loss_ba_pct=0)
    base.update(kw)
    return LinkArg(**base)


def test_link_spec_orders_fields_as_the_binary_reads_them():
    spec = _link(seed=7, stats_path="/t/s.json", control_path="/t/c.json").spec()
    assert spec == "ra,rb,25.0,1.0,0.5,10.0,0.0,0.0,7,0,/t/s.json,/t/c.json,"
    assert _link(loss_ab_pct=0, gso=True, netns="/proc/1/ns/net").spec().endswith(",0,1,,,/proc/1/ns/net")


def test_link_rejects_commas_and_takes_gso_with_loss():
    with pytest.raises(ValueError, match="stats_path"):
        _link(stats_path="/a,b")
    # GSO mode with loss: the compiled relay draws each segment of a super-frame on its own
    assert _link(gso=True).spec().startswith("ra,rb,25.0,1.0,0.5,10.0,0.0,0.0,0,1,")


def test_argv_puts_netns_and_ready_before_links():
    argv = fastrelay_argv([_link(), _link(if_a="x", if_b="y")], netns="ns1", ready_file="/t/r", binary=Path("/b"))
    assert argv[:5] == ["/b", "--netns", "ns1", "--ready-file", "/t/r"]
    assert argv.count("--link") == 2
    with pytest.raises(ValueError):
        fastrelay_argv([])


def test_available_needs_a_binary_not_older_than_its_source(tmp_path, monkeypatch):
    monkeypatch.delenv(fastrelay.RELAY_ENV, raising=False)
    src, binary = tmp_path / "f.c", tmp_path / "f"
    src.write_text("int main(void){return 0;}\n")
    assert not available(binary, src)  # missing
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    os.utime(binary, (time.time() - 100, time.time() - 100))
    assert not available(binary, src)  # stale
    os.utime(binary, None)
    assert available(binary, src)
    monkeypatch.setenv(fastrelay.RELAY_ENV, "python")
    assert not available(binary, src)


@needs_cc
def test_build_compiles_the_source(tmp_path):
    out = build(tmp_path / "bin" / "fastrelay")
    assert os.access(out, os.X_OK)


def test_build_failure_is_one_line_and_leaves_nothing(tmp_path, monkeypatch):
    src = tmp_path / "bad.c"
    src.write_text("this is not C\n")
    if fastrelay.compiler() is None:
        pytest.skip("no C compiler")
    with pytest.raises(FastRelayBuildError, match="failed on bad.c"):
        build(tmp_path / "out", src)
    assert not any(p.name.startswith(".out") or p.name == "out" for p in tmp_path.iterdir())


def test_build_without_compiler(tmp_path, monkeypatch):
    monkeypatch.setenv("CC", "no-such-compiler-xyz")
    with pytest.raises(FastRelayBuildError, match="no C compiler"):
        build(tmp_path / "out")


@needs_cc
@pytest.mark.parametrize("spec, message", [
    ("ra,rb,1,0,0,1,0,0,0", "malformed"),  # too few fields
    ("ra,rb,-1,0,0,1,0,0,0,0", "malformed"),  # negative delay
    ("ra,rb,1,0,101,1,0,0,0,0", "malformed"),  # loss above 100
])
def test_binary_refuses_malformed_links(tmp_path, spec, message):
    binary = build(tmp_path / "fastrelay")
    proc = subprocess.run([str(binary), "--link", spec], capture_output=True, text=True)
    assert proc.returncode == 2
    assert message in proc.stderr


def _tcp(impl, rate, rtt, ratio, ok=True):
    return {"implementation": impl, "configured_mbit": rate, "configured_rtt_ms": rtt, "actual_goodput_mbit": None,
            "goodput_ratio": ratio, "actual_idle_rtt_ms": rtt, "actual_loaded_mean_rtt_ms": None,
            "rtt_within_target": ok, "retransmits": 0}


def test_dataplane_targets_judge_the_compiled_relay_rows():
    from testbed.bench.relay_dataplane import render, targets

    r = {"fast_relay_built": True,
         "tcp": [_tcp("fast", 10000.0, 50.0, 0.95), _tcp("python", 10000.0, 50.0, 0.2, ok=False)],
         "loss": [{"implementation": "fast", "configured_loss_pct": 1.0, "offered_mbit": 100.0,
                   "actual_loss_pct": 1.2, "loss_within_target": True}]}
    t = targets(r)
    assert t == {"dataplane_10g_goodput_pass": True, "dataplane_rtt_pass": True, "dataplane_loss_pass": True,
                 "dataplane_lossy_3g_pass": False}  # no lossy TCP row: not a pass
    lossy = {"lossy_tcp": [{"implementation": "fast", "actual_goodput_mbit": 2900.0},
                           {"implementation": "python", "actual_goodput_mbit": 3100.0}]}
    assert not targets({**r, **lossy})["dataplane_lossy_3g_pass"]  # the Python relay's row does not count
    lossy["lossy_tcp"][0]["actual_goodput_mbit"] = 6100.0
    assert targets({**r, **lossy})["dataplane_lossy_3g_pass"]
    r["tcp"][0]["goodput_ratio"] = 0.5
    assert not targets(r)["dataplane_10g_goodput_pass"]
    assert "dataplane_10g_goodput_pass: FAIL" in "\n".join(render(r, targets(r)))
    r["tcp"] = [_tcp("fast", 1000.0, 20.0, 0.95)]  # no 10 Gbit/s row measured: not a pass
    assert not targets(r)["dataplane_10g_goodput_pass"]


def test_argv_ring_size_is_validated():
    assert fastrelay_argv([_link()], ring_mb=4, binary=Path("/b"))[1:3] == ["--ring-mb", "4"]
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="ring_mb"):
            fastrelay_argv([_link()], ring_mb=bad)


def test_argv_asks_for_real_time_priority_unless_told_not_to(monkeypatch):
    from testbed.netem.relay.relaypool import RELAY_RT_PRIO_ENV

    monkeypatch.delenv(RELAY_RT_PRIO_ENV, raising=False)
    argv = fastrelay_argv([_link()], binary=Path("/b"))
    assert argv[1:3] == ["--rt-prio", "1"] and argv[3] == "--link"
    assert "--rt-prio" not in fastrelay_argv([_link()], rt_prio=0, binary=Path("/b"))
    monkeypatch.setenv(RELAY_RT_PRIO_ENV, "0")
    assert "--rt-prio" not in fastrelay_argv([_link()], binary=Path("/b"))
    for bad in (-1, 100, 1.5, True):
        with pytest.raises(ValueError, match="rt_prio"):
            fastrelay_argv([_link()], rt_prio=bad)


def test_dataplane_render_shows_tcp_through_a_jittered_link():
    from testbed.bench.relay_dataplane import _quantiles, render

    ping = _quantiles([50.0, 52.0, 60.0, 48.0])
    assert ping["p50"] == 52.0 and ping["n"] == 4 and ping["std"] > 0
    rows = [{"implementation": "fast", "mode": "gso", "tcp_congestion": "bbr", "configured_mbit": 3000.0,
             "configured_delay_ms": 25.0,
             "configured_jitter_ms": 5.0, "actual_goodput_mbit": 2817.0, "goodput_ratio": 0.939, "retransmits": 0,
             "actual_ping_rtt_ms": ping, "load_avg_1m": 2.0,
             "actual_relay_delay_ab_ms": {"packets": 9, "p1": 36.25, "p50": 39.55, "p99": 44.85, "std": 1.89}},
            {"implementation": "python", "mode": "frame", "configured_mbit": 3000.0, "configured_delay_ms": 25.0,
             "configured_jitter_ms": 5.0, "actual_goodput_mbit": None, "goodput_ratio": None, "retransmits": None,
             "actual_ping_rtt_ms": {}, "actual_relay_delay_ab_ms": None, "load_avg_1m": 2.0}]
    md = "\n".join(render({"fast_relay_built": True, "tcp": [], "loss": [], "jitter": rows}))
    assert ("| fast | gso | bbr | 3000 | 25 +- 5 | 2817 | 0.939 | 0 | 48.0 / 52.0 / 60.0 (4.6) | "
            "36.2 / 39.5 / 44.9 (1.9) |") in md
    assert "| python | frame | - | 3000 | 25 +- 5 | - | - | - | - | - |" in md
    assert _quantiles([]) == {}
