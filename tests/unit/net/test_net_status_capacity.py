"""`testbed net status`: what this machine can give each link, and a warning when a link is
configured above it (measured by `testbed bench shaping` where recorded)."""

from __future__ import annotations

import json

from testbed.bench.capacity import link_capacity, measured_unshaped_mbit
from testbed.cli.cmd_net import status_lines, with_capacity
from testbed.netem.scaling import CAPACITY_MBIT_DIRECT, CAPACITY_MBIT_RELAY


def _bench(tmp_path, unshaped_ours=3870.0, unshaped_iperf=3500.0):
    f = tmp_path / "shaping.json"
    f.write_text(json.dumps({"goodput": [
        {"configured_mbit": 1000.0, "transfer_service_mbit": 950.0, "iperf3_mbit": 956.0},
        {"configured_mbit": None, "transfer_service_mbit": unshaped_ours, "iperf3_mbit": unshaped_iperf}]}))
    return f


def _state(rate_mbit: float, impairment: str = "tbf", delay_ms: float = 0.0) -> dict:
    return {"run_id": "abc123", "purpose": "net", "owner_pid": 1, "created_utc": "now", "impairment": impairment,
            "relays_alive": 0, "pids": [], "sites": {"a": {"addr": "10.200.0.1", "ns": "tb-abc123-s-a"}},
            "links": [{"key": "a-b", "rate_ab_mbit": rate_mbit, "rate_ba_mbit": rate_mbit, "delay_ms": delay_ms,
                       "jitter_ms": 0, "loss_pct": 0}]}


def test_measured_capacity_is_the_better_unshaped_goodput(tmp_path):
    assert measured_unshaped_mbit(_bench(tmp_path)) == 3870.0
    assert measured_unshaped_mbit(tmp_path / "missing.json") is None
    (tmp_path / "bad.json").write_text("{not json")
    assert measured_unshaped_mbit(tmp_path / "bad.json") is None


def test_defaults_where_nothing_was_measured(tmp_path):
    cap = link_capacity("tbf", False, tmp_path / "missing.json")
    assert cap.mbit == CAPACITY_MBIT_DIRECT and "bench shaping" in cap.source
    assert link_capacity("relay", True, _bench(tmp_path)).mbit == CAPACITY_MBIT_RELAY
    assert link_capacity("relay", False, _bench(tmp_path)).mbit == 3870.0  # no delay: not through the relay


def test_a_link_above_the_machine_is_warned_about(tmp_path):
    bench = _bench(tmp_path)
    lines = status_lines([with_capacity(_state(10000.0), bench)])
    assert any("link a-b" in ln and "(machine: ~3870 Mbit/s)" in ln for ln in lines), lines
    warn = [ln for ln in lines if "warning" in ln]
    assert len(warn) == 1 and "a-b" in warn[0] and "3870 Mbit/s" in warn[0] and "emulation.time_scale" in warn[0]
    ok = status_lines([with_capacity(_state(1000.0), bench)])
    assert not [ln for ln in ok if "warning" in ln]
