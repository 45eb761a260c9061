"""Plain timestamp,value CSV loader."""

from __future__ import annotations

from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import pytest

from testbed.errors import TraceError
from testbed.traces import load_csv

PT = ZoneInfo("America/Los_Angeles")


def test_numeric_seconds(tmp_path):
    p = tmp_path / "bw.csv"
    p.write_text("timestamp,value\n0,10\n60,5\n120,10\n")
    tr = load_csv(p, unit="Gbit/s")
    assert tr.unit == "Gbit/s" and tr.name == "bw" and tr.end_s == 180 and tr.at(61) == 5
    assert tr.meta["source"] == str(p)
    r = load_csv(p, unit="Mbit/s", scale=1000, duration_s=120, step_s=30)
    assert r.values.tolist() == [10000, 10000, 5000, 5000] and r.end_s == 120


def test_iso_timestamps_with_offsets_aligned_to_start(tmp_path):
    p = tmp_path / "pv.csv"
    p.write_text("timestamp,value\n2024-06-01T00:00:00-07:00,0\n2024-06-01T01:00:00-07:00,4\n"
                 "2024-06-01T09:00:00Z,8\n")
    tr = load_csv(p, unit="kW", start=datetime(2024, 6, 1, 7, tzinfo=timezone.utc))
    assert tr.times_s.tolist() == [0, 3600, 7200] and tr.at(7200) == 8
    start = datetime(2024, 6, 1, 0, 30, tzinfo=PT)
    assert load_csv(p, unit="kW", start=start, duration_s=3600, step_s=1800).values.tolist() == [0.0, 4.0]
    assert load_csv(p, unit="kW", start=start, duration_s=3600, step_s=3600).values.tolist() == [2.0]


def test_naive_iso_read_in_start_zone_and_custom_columns(tmp_path):
    p = tmp_path / "x.csv"
    p.write_text("when,kw\n2024-06-01 00:00,1\n2024-06-01 00:15,2\n")
    tr = load_csv(p, unit="kW", start=datetime(2024, 6, 1, tzinfo=PT), time_column="when", value_column="kw")
    assert tr.times_s.tolist() == [0, 900] and tr.end_s == 1800


def test_errors_name_the_file(tmp_path):
    p = tmp_path / "e.csv"
    p.write_text("timestamp,value\n2024-06-01T00:00:00Z,1\n2024-06-01T00:05:00Z,2\n")
    with pytest.raises(TraceError, match="scenario start") as info:
        load_csv(p, unit="kW")
    assert info.value.where == str(p)
    with pytest.raises(TraceError, match="covers"):
        load_csv(p, unit="kW", start=datetime(2024, 6, 1, tzinfo=timezone.utc), duration_s=3600)
    with pytest.raises(TraceError, match="missing column 'value2'"):
        load_csv(p, unit="kW", value_column="value2")
    bad = tmp_path / "bad.csv"
    bad.write_text("timestamp,value\nyesterday,1\n")
    with pytest.raises(TraceError, match="cannot parse timestamps"):
        load_csv(bad, unit="kW", start=datetime(2024, 6, 1, tzinfo=timezone.utc))
    back = tmp_path / "back.csv"
    back.write_text("timestamp,value\n10,1\n5,2\n")
    with pytest.raises(TraceError, match="strictly increase") as info:
        load_csv(back, unit="kW")
    assert info.value.where == str(back)
    amb = tmp_path / "amb.csv"
    amb.write_text("timestamp,value\n2024-11-03 01:30,1\n2024-11-03 03:00,1\n")
    with pytest.raises(TraceError, match="cannot parse"):
        load_csv(amb, unit="kW", start=datetime(2024, 11, 3, tzinfo=PT))


def test_single_row_needs_duration(tmp_path):
    p = tmp_path / "one.csv"
    p.write_text("timestamp,value\n0,3\n")
    assert load_csv(p, unit="kW", duration_s=50).end_s == 50
    with pytest.raises(TraceError, match="single-sample"):
        load_csv(p, unit="kW")
