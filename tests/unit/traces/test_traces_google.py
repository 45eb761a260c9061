"""Google 2019 power-trace loader, on CSVs written here."""

from __future__ import annotations

import gzip
from datetime import datetime, timezone

import pytest

from testbed.errors import TraceError
from testbed.traces import google_epoch, google_trace_start, load_google_power

T0_US = 600_000_000  # the trace period starts 600 s after the epoch
STEP_US = 300_000_000


def write(path, rows, header="time,cell,pdu,measured_power_util,production_power_util"):
    text = header + "\n" + "\n".join(",".join(str(x) for x in r) for r in rows) + "\n"
    if str(path).endswith(".gz"):
        with gzip.open(path, "wt") as f:
            f.write(text)
    else:
        path.write_text(text)
    return path


def two_pdus(n=24):
    rows = []
    for k in range(n):
        rows.append([T0_US + k * STEP_US, "a", "pdu1", 0.2, 0.1])
        rows.append([T0_US + k * STEP_US + 7_000_000, "a", "pdu2", 0.6 if k < n // 2 else 0.4, 0.5])
        rows.append([T0_US + k * STEP_US, "b", "pdu1", 0.9, 0.9])
    return rows


def test_epoch_is_600_s_before_may_first_pacific():
    assert google_epoch().astimezone(timezone.utc) == datetime(2019, 5, 1, 6, 50, tzinfo=timezone.utc)
    assert (google_trace_start() - google_epoch()).total_seconds() == 600.0


def test_pdu_filter_and_modes(tmp_path):
    path = write(tmp_path / "p.csv", two_pdus())
    avail = load_google_power(path, cell="a", pdu="pdu1", capacity_kw=1000, duration_s=3600, step_s=300)
    assert avail.unit == "kW" and len(avail) == 12 and avail.at(0.0) == pytest.approx(800.0)
    util = load_google_power(path, cell="a", pdu="pdu1", capacity_kw=1000, duration_s=3600, step_s=300,
                             mode="utilisation")
    assert util.at(0.0) == pytest.approx(200.0)
    prod = load_google_power(path, cell="b", column="production_power_util", capacity_kw=10,
                             duration_s=3600, step_s=300, mode="utilisation")
    assert prod.at(100.0) == pytest.approx(9.0)


def test_average_across_pdus_per_timestamp(tmp_path):
    path = write(tmp_path / "p.csv", two_pdus())
    tr = load_google_power(path, cell="a", capacity_kw=1000, duration_s=2 * 3600, step_s=300,
                           mode="utilisation")
    assert tr.at(0.0) == pytest.approx(400.0)  # mean(0.2, 0.6); pdu2 sampled 7 s later
    assert tr.at(3600.0 + 1) == pytest.approx(300.0)  # mean(0.2, 0.4)


def test_start_offset_and_gzip(tmp_path):
    path = write(tmp_path / "p.csv.gz", two_pdus())
    tr = load_google_power(path, cell="a", pdu="pdu2", capacity_kw=100, start_offset_s=3000,
                           duration_s=1200, step_s=600, mode="utilisation")
    assert tr.values.tolist() == pytest.approx([60.0, 40.0])  # 3000-3600 s at 0.6, then 0.4


def test_window_not_covered_and_gap(tmp_path):
    path = write(tmp_path / "p.csv", two_pdus())
    with pytest.raises(TraceError, match="covers") as info:
        load_google_power(path, capacity_kw=1, duration_s=3 * 3600, step_s=300)
    assert info.value.where == str(path)
    rows = [r for r in two_pdus() if not (3 * STEP_US < r[0] - T0_US < 20 * STEP_US)]
    with pytest.raises(TraceError, match="gap"):
        load_google_power(write(tmp_path / "g.csv", rows), capacity_kw=1, duration_s=600, step_s=300)


def test_bad_columns_and_values_name_file_and_column(tmp_path):
    path = write(tmp_path / "p.csv", [[T0_US, "a", "pdu1", 0.5]], header="time,cell,pdu,power")
    with pytest.raises(TraceError, match="missing column 'measured_power_util'") as info:
        load_google_power(path, capacity_kw=1, duration_s=300, step_s=300)
    assert info.value.where == str(path)
    bad = write(tmp_path / "b.csv", [[T0_US, "a", "pdu1", 1.5, 0.1],
                                     [T0_US + STEP_US, "a", "pdu1", 0.5, 0.1]])
    with pytest.raises(TraceError, match="measured_power_util.*outside"):
        load_google_power(bad, capacity_kw=1, duration_s=300, step_s=300)
    with pytest.raises(TraceError, match="no rows for"):
        load_google_power(bad, pdu="pdu9", capacity_kw=1, duration_s=300, step_s=300)
    with pytest.raises(TraceError, match="cannot read"):
        load_google_power(tmp_path / "absent.csv", capacity_kw=1, duration_s=300, step_s=300)
    with pytest.raises(ValueError):
        load_google_power(bad, capacity_kw=1, duration_s=300, step_s=300, mode="headroom")


def test_missing_values_are_dropped(tmp_path):
    rows = [[T0_US, "a", "pdu1", 0.5, 0.1], [T0_US + STEP_US, "a", "pdu1", "", 0.1],
            [T0_US + 2 * STEP_US, "a", "pdu1", 0.3, 0.1]]
    tr = load_google_power(write(tmp_path / "n.csv", rows), capacity_kw=10, duration_s=900, step_s=300,
                           mode="utilisation")
    assert tr.values.tolist() == pytest.approx([5.0, 5.0, 3.0])  # the NaN slot holds 0.5
