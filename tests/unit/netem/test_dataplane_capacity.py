"""``byte_scale: auto`` from the relay capacity the bench measured on this machine (cached), pure."""

from __future__ import annotations

import json

import pytest

from testbed.netem import dataplane_capacity as dc
from testbed.netem.relay import fastrelay
from testbed.netem.scaling import CAPACITY_MBIT_RELAY


def _row(impl, configured, got, rtt_ok=True):
    return {"implementation": impl, "configured_mbit": configured, "actual_goodput_mbit": got,
            "rtt_within_target": rtt_ok}


ROWS = [{"implementation": "unshaped", "configured_mbit": None, "actual_goodput_mbit": 8000.0},
        _row("fast", 1000.0, 955.0), _row("fast", 5000.0, 4800.0), _row("fast", 10000.0, 5500.0),
        _row("python", 1000.0, 930.0), _row("python", 5000.0, 3900.0)]


def test_capacity_is_the_largest_rate_carried_accurately_else_a_margin_below_the_most_carried():
    assert dc.capacity_from_rows(ROWS, "fast") == pytest.approx(5170.0)  # 10 Gbit/s carried 5.5: 0.94 x 5.5 > 5
    assert dc.capacity_from_rows(ROWS[:3], "fast") == 5000.0
    assert dc.capacity_from_rows(ROWS, "python") == pytest.approx(3666.0)
    assert dc.capacity_from_rows(ROWS[:2] + [_row("fast", 5000.0, 4800.0, rtt_ok=False)], "fast") == 1000.0
    assert dc.capacity_from_rows([ROWS[0], _row("fast", 10000.0, 9500.0)], "fast") == 8000.0  # <= unshaped
    assert dc.capacity_from_rows(ROWS, "nosuch") is None
    bbr = dict(_row("fast", 20000.0, 19500.0), tcp_congestion="bbr")  # runs use the default: a bbr row is not theirs
    assert dc.capacity_from_rows(ROWS[:3] + [bbr], "fast") == 5000.0


@pytest.fixture
def python_relay(monkeypatch):
    monkeypatch.setenv(fastrelay.RELAY_ENV, "python")


def test_record_then_read_back_for_this_machine_and_relay(tmp_path, python_relay):
    path = tmp_path / "c" / "cap.json"
    entry = dc.record({"tcp": ROWS}, path=path, command="bench", now=0)
    assert entry["capacity_mbit"] == pytest.approx(3666.0) and entry["implementation"] == "python"
    assert entry["measured_utc"] == "1970-01-01T00:00:00Z" and entry["measured_by"] == "bench"
    assert [p.name for p in path.parent.iterdir()] == ["cap.json"]  # no temp file left
    cap = dc.relay_capacity(CAPACITY_MBIT_RELAY, path)
    assert cap.mbit == pytest.approx(3666.0) and "measured for the Python relay on 1970-01-01T00:00:00Z by `bench`" in cap.source
    assert dc.record({"tcp": ROWS[:1]}, path=tmp_path / "none.json") is None
    assert not (tmp_path / "none.json").exists()


@pytest.mark.parametrize(("field", "value", "why"), [("host", "elsewhere", "another host"),
                                                     ("kernel", "0.0.1", "another kernel"),
                                                     ("implementation", "fast", "another implementation"),
                                                     ("capacity_mbit", -5, "not a positive number"),
                                                     ("schema", 99, "not a capacity record")])
def test_a_record_for_another_machine_or_relay_falls_back_to_the_default(tmp_path, python_relay, field, value, why):
    path = tmp_path / "cap.json"
    entry = dc.record({"tcp": ROWS}, path=path)
    path.write_text(json.dumps({**entry, field: value}))
    cap = dc.relay_capacity(CAPACITY_MBIT_RELAY, path)
    assert cap.mbit == CAPACITY_MBIT_RELAY and why in cap.source and cap.source.startswith("default 500")


def test_a_rebuilt_compiled_relay_invalidates_the_record(tmp_path, monkeypatch):
    monkeypatch.setattr(fastrelay, "available", lambda *a, **k: True)
    path = tmp_path / "cap.json"
    entry = dc.record({"tcp": ROWS}, path=path)
    assert entry["implementation"] == "fast" and entry["capacity_mbit"] == pytest.approx(5170.0)
    assert dc.relay_capacity(CAPACITY_MBIT_RELAY, path).mbit == pytest.approx(5170.0)
    path.write_text(json.dumps({**entry, "source_sha256": "0" * 64}))
    cap = dc.relay_capacity(CAPACITY_MBIT_RELAY, path)
    assert cap.mbit == CAPACITY_MBIT_RELAY and "another relay build" in cap.source


def test_missing_or_unreadable_cache(tmp_path):
    assert "not measured on this machine" in dc.relay_capacity(500.0, tmp_path / "missing.json").source
    (tmp_path / "bad.json").write_text("{not json")
    assert "unreadable" in dc.relay_capacity(500.0, tmp_path / "bad.json").source


def test_byte_scale_auto_fits_the_fastest_link_to_the_measured_relay(tmp_path, python_relay, monkeypatch):
    from testbed.inputs import build_inputs
    from testbed.spec import scenario_from_dict
    from testbed.substrate.emulated.wan import plan_wan
    from tests.conftest import small_scenario_dict

    inputs = build_inputs(scenario_from_dict(small_scenario_dict(emulation={"time_scale": 1, "byte_scale": "auto"})))
    default, _ = plan_wan(inputs, "aaaaa1", impairment="relay")  # the 10 Gbit/s link; nothing measured: 500
    assert default.byte_scale == pytest.approx(CAPACITY_MBIT_RELAY / 10000) and "default" in default.capacity_source
    path = tmp_path / "cap.json"
    monkeypatch.setenv(dc.CACHE_ENV, str(path))
    dc.record({"tcp": ROWS}, path=path)
    measured, plan = plan_wan(inputs, "aaaaa2", impairment="relay")
    assert measured.capacity_mbit == pytest.approx(3666.0) and measured.byte_scale == pytest.approx(0.3666)
    assert "measured for the Python relay" in measured.to_dict()["capacity_source"]
    assert max(lk.rate_ab_mbit for lk in plan.links) == pytest.approx(3666.0)
    direct, _ = plan_wan(inputs, "aaaaa3", impairment="netem")
    assert direct.capacity_mbit == 2000.0  # no relay: not bounded by it


def test_net_status_bounds_relayed_links_by_the_measured_relay(tmp_path, python_relay, monkeypatch):
    from testbed.bench.capacity import link_capacity

    bench = tmp_path / "shaping.json"
    bench.write_text(json.dumps({"goodput": [{"configured_mbit": None, "iperf3_mbit": 8000.0}]}))
    assert link_capacity("relay", True, bench).mbit == CAPACITY_MBIT_RELAY
    monkeypatch.setenv(dc.CACHE_ENV, str(tmp_path / "cap.json"))
    dc.record({"tcp": ROWS}, path=tmp_path / "cap.json")
    cap = link_capacity("relay", True, bench)
    assert cap.mbit == pytest.approx(3666.0) and "measured for the Python relay" in cap.source
    assert link_capacity("relay", False, bench).mbit == 8000.0
