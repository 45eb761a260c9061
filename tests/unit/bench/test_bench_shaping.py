"""bench shaping's us-100 vs Mininet part: Mininet found or not, rendering, ratios (no root needed)."""

from __future__ import annotations

import pytest

from testbed.bench import shaping


def _top(up=4.0, down=0.5):
    return {"topology": "us-100.yaml", "sites": 101, "links": 100, "impairment": "relay", "namespaces": 203,
            "relays": 100, "up_s": up, "down_s": down, "leftover_namespaces": 0, "target_up_s": 60.0}


def _cmp(mn_available=True):
    mn = {"command": shaping.MININET_CMD, "hosts": 100, "bw_mbit": None, "available": mn_available}
    if mn_available:
        mn.update(up_s=3.0, down_s=1.5)
    else:
        mn["reason"] = "Mininet is not installed (no `mn` on PATH)"
    c = {"cli": {"command_up": "testbed net up topologies/us-100.yaml", "command_down": "testbed net down --run ID",
                 "up_s": 6.0, "down_s": 1.0}, "mininet": mn, "mininet_bw": dict(mn), "repeat": 1, "ratio_target": 2.0}
    if mn_available:
        c["ratio_fabric"], c["ratio_cli"] = 4.5 / 4.5, 7.0 / 4.5
    return c


def test_missing_mininet_is_reported_not_a_failure(monkeypatch):
    monkeypatch.setattr(shaping.shutil, "which", lambda name: None)
    row = shaping.mininet_row()
    assert row["available"] is False and "not installed" in row["reason"]
    assert row["command"] == shaping.MININET_CMD
    md = shaping.render({"impairment": "relay", "topology": _top(), "us100_vs_mininet": _cmp(False),
                         "targets": {"topology_pass": True}})
    assert "Mininet not measured: Mininet is not installed" in md
    assert "us-100 vs Mininet: not measured" in md
    assert "## Goodput" not in md  # --only us100: just this part


def test_render_shows_both_sides_the_ratio_and_the_command():
    md = shaping.render({"impairment": "relay", "topology": _top(), "us100_vs_mininet": _cmp(True),
                         "targets": {"topology_pass": True, "us100_vs_mininet_pass": True}})
    assert f"`{shaping.MININET_CMD}` | 3.00 | 1.50 | 4.50 |" in md
    assert "| 4.00 | 0.50 | 4.50 |" in md  # testbed in-process
    assert "in-process 1.00, CLI 1.56 (target <= 2)" in md
    assert "us-100 vs Mininet: PASS" in md


def test_mininet_interpreter_comes_from_mn(tmp_path, monkeypatch):
    mn = tmp_path / "mn"
    mn.write_text("#!/usr/bin/python3 -u\nprint('mn')\n")
    monkeypatch.setattr(shaping.shutil, "which", lambda name: str(mn))
    assert shaping._mininet_python() == "/usr/bin/python3"
    mn.write_text("no shebang\n")
    assert shaping._mininet_python() is None


def test_mininet_row_reports_a_failing_mininet(tmp_path, monkeypatch):
    fake = tmp_path / "python-fake"
    fake.write_text("#!/bin/sh\necho 'ImportError: No module named mininet' >&2\nexit 1\n")
    fake.chmod(0o755)
    mn = tmp_path / "mn"
    mn.write_text(f"#!{fake}\n")
    monkeypatch.setattr(shaping.shutil, "which", lambda name: str(mn))
    monkeypatch.setattr(shaping.os.path, "exists", lambda p: False)
    row = shaping.mininet_row(n_hosts=3)
    assert row["available"] is False
    assert "exit 1" in row["reason"] and "No module named mininet" in row["reason"]
    assert "single,3" in row["command"]


def test_unknown_part_is_refused_before_anything_runs(tmp_path):
    with pytest.raises(ValueError, match="unknown part"):
        shaping.run(tmp_path, only="us200")
    assert not (tmp_path / "shaping.json").exists()


def test_render_shows_relay_processes_sampled_rtts_and_one_process_per_link():
    top = {**_top(), "relay_processes": 2,
           "rtt": [{"link": "a-b", "configured_rtt_ms": 20.0, "actual_idle_rtt_ms": 20.4, "within_target": True}]}
    c = {**_cmp(True), "topology_relay_per_link": {**_top(5.0, 0.3), "relay_processes": 100, "rtt": []}}
    md = shaping.render({"impairment": "relay", "topology": top, "us100_vs_mininet": c,
                         "targets": {"topology_pass": True, "us100_vs_mininet_pass": True}})
    assert "100 relayed links, 2 relay processes) | 4.00 | 0.50 | 4.50 |" in md
    assert "one relay process per link (100 processes) | 5.00 | 0.30 | 5.30 |" in md
    assert "served by 2 relay process(es); idle RTT while up: a-b 20.40 ms (configured 20, ok)" in md


def test_dataplane_render_compares_each_relay_with_the_unshaped_veth_just_before():
    from testbed.bench.relay_dataplane import render

    rows = [{"implementation": "unshaped", "configured_mbit": None, "configured_rtt_ms": None,
             "actual_goodput_mbit": 6000.0, "goodput_ratio": None, "actual_idle_rtt_ms": 0.01,
             "actual_loaded_mean_rtt_ms": 0.3, "retransmits": 5},
            {"implementation": "fast", "configured_mbit": 10000.0, "configured_rtt_ms": 50.0,
             "actual_goodput_mbit": 4500.0, "goodput_ratio": 0.45, "unshaped_goodput_mbit": 6000.0,
             "ratio_to_unshaped": 0.75, "actual_idle_rtt_ms": 50.5, "actual_loaded_mean_rtt_ms": 90.0,
             "retransmits": 0, "rtt_within_target": True}]
    md = "\n".join(render({"fast_relay_built": True, "tcp": rows, "loss": []}))
    assert "| fast | - | 10000 | 50 | 4500 | 0.450 | 0.750 | 50.50 |" in md
    assert "vs unshaped just before" in md


def test_dataplane_render_names_each_relays_largest_super_frame():
    from testbed.bench.relay_dataplane import render

    def row(impl, gso):
        return {"implementation": impl, "configured_mbit": 10000.0, "configured_rtt_ms": 50.0,
                "actual_goodput_mbit": 4000.0, "goodput_ratio": 0.4, "actual_idle_rtt_ms": 50.5,
                "actual_loaded_mean_rtt_ms": 90.0, "retransmits": 0, "rtt_within_target": True, "gso_max_bytes": gso}

    rows = [dict(row("unshaped", 65536), configured_mbit=None), row("fast", 196608), row("python", 65536)]
    md = "\n".join(render({"fast_relay_built": True, "tcp": rows, "loss": []}))
    assert "largest super-frame a site sends (IPv4 GSO max size, bytes): fast 196608, python 65536" in md
    md = "\n".join(render({"fast_relay_built": True, "tcp": [row("fast", None)], "loss": []}))
    assert "largest super-frame" not in md  # a kernel that does not say


def test_dataplane_render_shows_tcp_through_a_lossy_link():
    from testbed.bench.relay_dataplane import render

    row = {"implementation": "fast", "mode": "gso", "configured_mbit": 3000.0, "configured_loss_pct": 1.0,
           "configured_rtt_ms": 10.0, "actual_goodput_mbit": 2600.0, "goodput_ratio": 0.8667,
           "actual_retransmitted_pct": 1.02}
    md = "\n".join(render({"fast_relay_built": True, "tcp": [], "loss": [], "lossy_tcp": [row]}))
    assert "| fast | gso | - | 3000 | 1.0 | 10 | 2600 | 0.867 | 1.02 | - | - |" in md
    from testbed.bench.relay_dataplane import max_lossy_goodput_ratio

    assert round(max_lossy_goodput_ratio(1.0), 4) == round(1448 / 1514 * 0.99, 4) == 0.9468
    row.update(max_goodput_ratio=max_lossy_goodput_ratio(1.0), load_avg_1m=3.0, tcp_congestion="bbr")
    md = "\n".join(render({"fast_relay_built": True, "tcp": [], "loss": [], "lossy_tcp": [row]}))
    assert "| fast | gso | bbr | 3000 | 1.0 | 10 | 2600 | 0.867 | 1.02 | 0.947 | 3.0 |" in md
    assert "segments retransmitted %" not in "\n".join(render({"fast_relay_built": True, "tcp": [], "loss": []}))


def test_dataplane_leaves_tcp_start_up_out_and_reports_it_beside():
    from testbed.bench.relay_dataplane import goodput_with_startup_mbit, render, startup_omit_s

    assert [startup_omit_s(r) for r in (0.0, 20.0, 50.0, 100.0, 200.0, 400.0)] == [1, 1, 1, 2, 4, 4]
    data = {"intervals": [{"sum": {"seconds": 1.0, "bytes": 500e6 / 8, "omitted": True}},
                          {"sum": {"seconds": 1.0, "bytes": 1500e6 / 8}}]}
    assert goodput_with_startup_mbit(data) == 1000.0
    assert goodput_with_startup_mbit({"intervals": []}) is None and goodput_with_startup_mbit(None) is None
    row = {"implementation": "fast", "configured_mbit": 10000.0, "configured_rtt_ms": 50.0,
           "actual_goodput_mbit": 9500.0, "goodput_ratio": 0.95, "ratio_to_unshaped": 0.97,
           "actual_idle_rtt_ms": 50.5, "actual_loaded_mean_rtt_ms": 51.0, "retransmits": 0,
           "rtt_within_target": True, "actual_goodput_with_startup_mbit": 8100.0, "startup_omitted_s": 1,
           "load_avg_1m": 4.25, "actual_relay_ran_share": 0.5, "actual_relay_runqueue_wait_share": 0.0}
    md = "\n".join(render({"fast_relay_built": True, "tcp": [row], "loss": []}))
    assert "| fast | - | 10000 | 50 | 9500 | 0.950 | 0.970 | 50.50 | 51.0 | True | 0 | 8100 (1) | 4.2 | 0.50 / 0.00 |" in md
    md = "\n".join(render({"fast_relay_built": True, "tcp": [dict(row, tcp_congestion="bbr")], "loss": []}))
    assert "| fast | bbr | 10000 | 50 | 9500 |" in md and "TCP cc: the sites' congestion control" in md


def test_dataplane_goodput_target_is_judged_with_the_default_congestion_control():
    from testbed.bench.relay_dataplane import targets

    def row(ratio, cc):
        return {"implementation": "fast", "tcp_congestion": cc, "configured_mbit": 10000.0, "configured_rtt_ms": 50.0,
                "goodput_ratio": ratio, "rtt_within_target": True}

    loss = [{"implementation": "fast", "loss_within_target": True}]
    ok = targets({"fast_relay_built": True, "tcp": [row(0.955, "cubic"), row(0.93, "bbr")], "loss": loss})
    assert ok["dataplane_10g_goodput_pass"] is True  # bbr's ProbeRTT pauses are its sender's
    bad = targets({"fast_relay_built": True, "tcp": [row(0.93, "cubic"), row(0.96, "bbr")], "loss": loss})
    assert bad["dataplane_10g_goodput_pass"] is False
    none = targets({"fast_relay_built": True, "tcp": [row(0.96, "bbr")], "loss": loss})
    assert none["dataplane_10g_goodput_pass"] is False  # no row judged: not a pass


def test_relay_scheduling_shares_come_from_schedstat_deltas():
    from testbed.bench.relay_dataplane import relay_sched_shares

    before = {1: (0, 0), 2: (1_000_000_000, 0)}
    after = {1: (2_000_000_000, 500_000_000), 2: (2_000_000_000, 500_000_000), 3: (9, 9)}
    assert relay_sched_shares(before, after, 6.0) == (0.5, 1 / 6)
    assert relay_sched_shares({}, after, 6.0) == (None, None)


# --- one transfer beside competing flows (issue #33) ---------------------------------------------

def test_jains_index_is_one_for_equal_shares_and_one_over_n_for_a_hog():
    assert shaping.jain_index([5, 5, 5, 5]) == pytest.approx(1.0)
    assert shaping.jain_index([8, 0, 0, 0]) == pytest.approx(0.25)
    assert shaping.jain_index([3, 1]) == pytest.approx(16 / 20)
    assert shaping.jain_index([]) is None and shaping.jain_index([0, 0]) is None


SS = ("0      0      10.200.0.1:41000 10.200.0.2:7100\n"
      "\t cubic wscale:9,9 rto:220 rtt:20.5/0.3 mss:1448 cwnd:10 bytes_sent:5000 bytes_acked:4001 segs_out:4\n"
      "0      0      10.200.0.1:41002 10.200.0.2:5300\n"
      "\t cubic wscale:9,9 rto:220 mss:1448 bytes_acked:123456789 segs_out:9\n"
      "ESTAB 0 0 10.200.0.1:41004 10.200.0.2:5300\n"
      "\t cubic bytes_acked:7\n")


def test_ss_output_gives_bytes_acked_per_connection_with_or_without_the_state_column():
    assert shaping.tcp_acked(SS) == {(41000, 7100): 4001, (41002, 5300): 123456789, (41004, 5300): 7}
    assert shaping.tcp_acked("") == {}


def test_contention_render_says_netem_was_not_measured_on_the_relay():
    row = {"configured_mbit": 1000.0, "competing_flows": 4, "total_mbit": 950.0, "transfer_mbit": 150.0,
           "fair_share_mbit": 200.0, "share_of_configured": 0.75, "share_of_carried": 0.79, "jain_index": 0.97,
           "competing_mbit": [210.0, 200.0, 195.0, 195.0], "window_s": 3.9}
    text = "\n".join(shaping.render_contention({"impairment": "relay", "contention": [row], "contention_wall_s": 60}))
    assert "| 1000 | 4 | 950.0 | 150.0 | 200.0 | 0.75 | 0.79 | 0.970 | 195.0-210.0 | 3.9 |" in text
    assert "netem: not measured here" in text
    assert "netem: not measured" not in "\n".join(shaping.render_contention({"impairment": "netem",
                                                                             "contention": [row]}))
