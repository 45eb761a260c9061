"""Google power traces replayed aligned to the scenario's ``start`` (time of day / weekday, US Pacific)."""

from __future__ import annotations

import math
from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import numpy as np
import pytest

from testbed.errors import SpecError
from testbed.spec.load import scenario_from_dict
from testbed.traces import TraceContext, build_renewable
from testbed.traces.google import replay_offset_s
from tests.conftest import small_scenario_dict

PT = ZoneInfo("America/Los_Angeles")
T0_US = 600_000_000
STEP_S = 300
PEAK_H = 15.0  # the synthetic utilisation peaks at 15:00 Pacific every day
WEEKEND_DROP = 0.3


def util_at(h_since_trace_start: float) -> float:
    """Diurnal utilisation peaking at PEAK_H Pacific, 0.3 lower on Saturdays and Sundays."""
    day = int(h_since_trace_start // 24)
    weekday = (2 + day) % 7  # 2019-05-01 is a Wednesday (weekday 2)
    drop = WEEKEND_DROP if weekday >= 5 else 0.0
    return 0.5 + 0.2 * math.cos(2 * math.pi * (h_since_trace_start - PEAK_H) / 24.0) - drop


def write_trace(path, days=15):
    rows = ["time,cell,pdu,measured_power_util,production_power_util"]
    for k in range(days * 86400 // STEP_S):
        u = util_at(k * STEP_S / 3600.0)
        rows.append(f"{T0_US + k * STEP_S * 1_000_000},a,pdu1,{u:.6f},{u:.6f}")
    path.write_text("\n".join(rows) + "\n")
    return path


def replay(path, start: datetime, duration_h=24, **source):
    d = small_scenario_dict(start=start.isoformat(), duration_h=duration_h)
    d["traces"]["renewable"]["default"] = {"kind": "google", "file": str(path), "capacity_kw": 1.0,
                                           "mode": "utilisation", **source}
    sc = scenario_from_dict(d)
    ctx = TraceContext(scenario=sc, site_name="a", seed=1, horizon_s=sc.duration_s, step_s=sc.step_s, name="g")
    return build_renewable(sc.traces.renewable["default"], ctx)


def peak_after_start_h(trace) -> float:
    first_day = trace.times_s < 86400
    return float(trace.times_s[first_day][np.argmax(trace.values[first_day])]) / 3600.0


@pytest.mark.parametrize("start", [
    datetime(2024, 6, 3, 0, 0, tzinfo=timezone.utc),                 # Sunday 17:00 PDT
    datetime(2024, 6, 5, 10, 0, tzinfo=PT),                          # Wednesday 10:00 PDT
    datetime(2024, 1, 10, 6, 0, tzinfo=PT),                          # winter: 06:00 PST
    datetime(2024, 6, 4, 9, 30, tzinfo=ZoneInfo("Europe/Rome")),     # Tuesday 00:30 PDT
])
def test_daily_phase_follows_start(tmp_path, start):
    path = write_trace(tmp_path / "g.csv")
    start_pt_h = start.astimezone(PT).hour + start.astimezone(PT).minute / 60.0
    expected = (PEAK_H - start_pt_h) % 24.0  # the 15:00 Pacific peak, seen from start
    for align in ("day", "week"):
        tr = replay(path, start, align=align)
        assert peak_after_start_h(tr) == pytest.approx(expected, abs=STEP_S / 3600.0), align
    # the old behaviour (replay from 2019-05-01 00:00 PT whatever the start) stays selectable
    assert peak_after_start_h(replay(path, start, align="trace_start")) == pytest.approx(PEAK_H, abs=0.1)


def test_week_alignment_follows_the_weekday(tmp_path):
    path = write_trace(tmp_path / "g.csv")
    saturday_noon = datetime(2024, 6, 8, 12, 0, tzinfo=PT)
    week = replay(path, saturday_noon, duration_h=6, align="week")
    day = replay(path, saturday_noon, duration_h=6, align="day")  # noon of Wednesday 2019-05-01
    expected = [util_at(72 + 12 + t / 3600.0) for t in week.times_s]  # Saturday 2019-05-04 12:00 PT
    assert week.values == pytest.approx(expected, abs=1e-5)
    assert np.all(day.values - week.values == pytest.approx(WEEKEND_DROP, abs=1e-5))


def test_offset_h_shifts_after_alignment(tmp_path):
    path = write_trace(tmp_path / "g.csv")
    start = datetime(2024, 6, 5, 10, 0, tzinfo=PT)
    shifted = replay(path, start, offset_h=5, align="day")
    assert peak_after_start_h(shifted) == pytest.approx(0.0, abs=STEP_S / 3600.0)  # 10:00 + 5 h = 15:00
    base = replay(path, start, duration_h=30, align="day")
    assert shifted.values == pytest.approx(base.values[5 * 12: 5 * 12 + len(shifted)], abs=1e-9)
    assert replay(path, start, offset_h=-10, align="day").values[0] == pytest.approx(util_at(0.0), abs=1e-5)


def test_replay_offset_rules():
    sunday_5pm_pdt = datetime(2024, 6, 3, 0, 0, tzinfo=timezone.utc)
    assert replay_offset_s(sunday_5pm_pdt, align="day") == 17 * 3600
    assert replay_offset_s(sunday_5pm_pdt, align="week") == (4 * 24 + 17) * 3600  # Wed -> Sun: 4 days
    assert replay_offset_s(sunday_5pm_pdt, align="trace_start") == 0
    assert replay_offset_s(sunday_5pm_pdt, align="trace_start", offset_h=-1.5) == -5400
    assert replay_offset_s(datetime(2024, 1, 10, 8, 0, tzinfo=timezone.utc)) == 0  # 00:00 PST
    with pytest.raises(ValueError, match="align"):
        replay_offset_s(sunday_5pm_pdt, align="month")


def test_alignment_past_the_data_names_the_file_and_the_alignment(tmp_path):
    path = write_trace(tmp_path / "g.csv", days=2)
    d = small_scenario_dict(start="2024-06-08T12:00:00-07:00", duration_h=6)
    d["traces"]["renewable"]["default"] = {"kind": "google", "file": str(path), "capacity_kw": 1.0, "align": "week"}
    from testbed.inputs import build_inputs

    with pytest.raises(SpecError) as e:
        build_inputs(scenario_from_dict(d), 1)
    text = str(e.value)
    assert "traces.renewable.default.file" in text and "covers" in text and "align: week" in text


def test_old_start_offset_h_is_an_unknown_field(tmp_path):
    path = write_trace(tmp_path / "g.csv", days=2)
    d = small_scenario_dict()
    d["traces"]["renewable"]["default"] = {"kind": "google", "file": str(path), "capacity_kw": 1.0, "start_offset_h": 3}
    with pytest.raises(SpecError, match="start_offset_h"):
        scenario_from_dict(d)
