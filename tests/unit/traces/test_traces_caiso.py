"""CAISO Production and Curtailments loader, on workbooks built here with openpyxl."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import openpyxl
import pytest

from testbed.errors import TraceError
from testbed.traces import load_caiso

PT = ZoneInfo("America/Los_Angeles")
H = 3600.0
CURT = ["Date", "Hour", "Interval", "Wind Curtailment", "Solar Curtailment", "Reason"]
PROD = ["Date", "Hour", "Interval", "Load", "Solar", "Wind", "Net Load"]


def day_rows(day: datetime, hours, value=lambda k: float(k)):
    """Production rows for the given hour labels, value = running row number."""
    rows, k = [], 0
    for h in hours:
        for i in range(1, 13):
            rows.append([day, h, i, 20000.0, value(k), 3000.0, 17000.0])
            k += 1
    return rows


def write_book(path, *, curtailments=(), production=None, curt_header=CURT, prod_header=PROD,
               title_rows=0):
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Production"
    for _ in range(title_rows):
        ws.append(["CAISO Production and Curtailments (synthetic test data)"])
    ws.append(prod_header)
    for r in production if production is not None else day_rows(datetime(2024, 4, 20), range(1, 25)):
        ws.append(r)
    wc = wb.create_sheet("Curtailments")
    wc.append(curt_header)
    for r in curtailments:
        wc.append(list(r))
    wb.save(path)
    return path


APR20 = datetime(2024, 4, 20)
START = datetime(2024, 4, 20, tzinfo=PT)


def test_missing_intervals_are_zero_and_hour_ending_alignment(tmp_path):
    book = write_book(tmp_path / "c.xlsx", curtailments=[
        (APR20, 10, 1, 0.0, 100.0, "Local"),   # 09:00-09:05 local
        (APR20, 10, 2, None, 50.0, "Local"),    # blank wind -> 0
        (APR20, 24, 12, 5.0, 0.0, "System"),    # 23:55-24:00
    ])
    tr = load_caiso(book, start=START, duration_s=86400, step_s=300)
    assert tr.unit == "kW" and len(tr) == 288 and tr.end_s == 86400
    assert tr.at(9 * H) == 100_000.0 and tr.at(9 * H + 300) == 50_000.0
    assert tr.at(9 * H - 1) == 0.0 and tr.at(9 * H + 600) == 0.0
    assert tr.integrate(0, 86400) == pytest.approx(150_000.0 * 300)
    wind = load_caiso(book, start=START, duration_s=86400, step_s=300, column="wind_curtailment")
    assert wind.at(24 * H - 1) == 5000.0 and wind.at(9 * H) == 0.0
    total = load_caiso(book, start=START, duration_s=86400, step_s=300, column="total_curtailment")
    assert total.at(24 * H - 1) == 5000.0 and total.at(9 * H) == 100_000.0


def test_repeated_interval_rows_are_summed_and_scale_to_kw(tmp_path):
    book = write_book(tmp_path / "c.xlsx", curtailments=[
        (APR20, 12, 1, 0.0, 30.0, "Local"), (APR20, 12, 1, 0.0, 70.0, "System"),
        (APR20, 13, 1, 0.0, 25.0, "System"),
    ])
    tr = load_caiso(book, start=START, duration_s=86400, step_s=300, scale_to_kw=400.0)
    assert tr.at(11 * H) == 400.0 and tr.at(12 * H) == 100.0
    assert tr.meta["peak_mw"] == 100.0


def test_scenario_start_offset_and_hourly_mean(tmp_path):
    book = write_book(tmp_path / "c.xlsx", curtailments=[(APR20, 15, i, 0.0, 12.0, "L") for i in range(1, 7)])
    start = datetime(2024, 4, 20, 12, tzinfo=PT)
    tr = load_caiso(book, start=start, duration_s=6 * H, step_s=H)
    assert len(tr) == 6 and tr.at(2 * H) == pytest.approx(6_000.0)  # half of 14:00-15:00 at 12 MW
    assert tr.at(1 * H) == 0.0


def test_production_columns_case_insensitive_and_header_below_title(tmp_path):
    book = write_book(tmp_path / "p.xlsx", title_rows=2)
    tr = load_caiso(book, start=START, duration_s=86400, step_s=300, column="production:net  LOAD")
    assert tr.at(0.0) == 17_000_000.0
    solar = load_caiso(book, start=START, duration_s=86400, step_s=300, column="production:Solar")
    assert solar.at(300.0 * 7) == 7000.0  # row number 7 in MW -> kW


def test_spring_forward_day_drops_the_missing_hour(tmp_path):
    mar10 = datetime(2024, 3, 10)  # 02:00 PST -> 03:00 PDT
    start = datetime(2024, 3, 10, tzinfo=PT)
    rows = [(mar10, 3, 1, 0.0, 99.0, "L"), (mar10, 4, 1, 0.0, 40.0, "L"), (mar10, 2, 12, 0.0, 20.0, "L")]
    book = write_book(tmp_path / "s.xlsx", curtailments=rows,
                      production=day_rows(mar10, [1, 2] + list(range(4, 25))))
    tr = load_caiso(book, start=start, duration_s=23 * H, step_s=300)
    assert tr.meta["dst_dropped_rows"] == 1  # Hour 3 does not exist that day
    assert tr.at(2 * H) == 40_000.0  # HE4 starts 03:00 PDT = 2 h after midnight PST
    assert tr.at(2 * H - 1) == 20_000.0  # HE2 interval 12: 01:55 PST
    assert tr.integrate(0, 23 * H) == pytest.approx(60_000.0 * 300)
    with pytest.raises(TraceError, match="covers"):
        load_caiso(book, start=start, duration_s=24 * H, step_s=300)  # the day has 23 hours
    prod = load_caiso(book, start=start, duration_s=23 * H, step_s=300, column="production:Solar")
    assert prod.at(2 * H) == 24_000.0  # row 24 = first interval of HE4, no gap
    ordinal = load_caiso(book, start=start, duration_s=23 * H, step_s=300, hour_labels="ordinal")
    assert ordinal.at(2 * H) == 99_000.0 and ordinal.at(3 * H) == 40_000.0


def test_fall_back_day_repeated_hour_two_and_hour_25(tmp_path):
    nov3 = datetime(2024, 11, 3)  # 02:00 PDT -> 01:00 PST: 25 hours
    start = datetime(2024, 11, 3, tzinfo=PT)
    repeated = day_rows(nov3, [1, 2, 2] + list(range(3, 25)))
    tr = load_caiso(write_book(tmp_path / "f1.xlsx", production=repeated), start=start,
                    duration_s=25 * H, step_s=300, column="production:Solar")
    assert tr.end_s == 25 * H
    assert tr.at(1 * H) == 12_000.0 and tr.at(2 * H) == 24_000.0 and tr.at(3 * H) == 36_000.0
    hour25 = day_rows(nov3, [1, 2] + list(range(3, 26)))  # HE25 = the repeated hour
    tr25 = load_caiso(write_book(tmp_path / "f2.xlsx", production=hour25), start=start,
                      duration_s=25 * H, step_s=300, column="production:Solar")
    assert tr25.at(1 * H) == 12_000.0 and tr25.at(2 * H) == 24 * 12 * 1000.0 and tr25.at(3 * H) == 24_000.0
    ordinal = load_caiso(write_book(tmp_path / "f3.xlsx", production=hour25), start=start,
                         duration_s=25 * H, step_s=300, column="production:Solar", hour_labels="ordinal")
    assert ordinal.at(24 * H) == 24 * 12 * 1000.0 and ordinal.at(2 * H) == 24_000.0
    # Curtailments: a single Hour-2 row is the first pass; Local and System rows are distinct.
    curt = [(nov3, 2, 1, 0.0, 10.0, "Local"), (nov3, 2, 1, 0.0, 5.0, "System"),
            (nov3, 2, 1, 0.0, 7.0, "Local")]
    c = load_caiso(write_book(tmp_path / "f4.xlsx", curtailments=curt), start=start, duration_s=25 * H,
                   step_s=300)
    assert c.at(1 * H) == 15_000.0 and c.at(2 * H) == 7_000.0


@pytest.mark.parametrize(
    ("rows", "match"),
    [
        ([(APR20, 25, 1, 0.0, 1.0, "L")], "Hour 25 on a day that is not a fall-back day"),
        ([(APR20, 5, 13, 0.0, 1.0, "L")], "Interval must be 1-12"),
        ([(APR20, 0, 1, 0.0, 1.0, "L")], "Hour must be"),
        ([(APR20, 5.5, 1, 0.0, 1.0, "L")], "whole numbers"),
        ([(APR20, 5, 1, 0.0, "lots", "L")], "must be numeric"),
        ([("not a date", 5, 1, 0.0, 1.0, "L")], "Date"),
    ],
)
def test_bad_rows_are_errors_naming_the_file(tmp_path, rows, match):
    book = write_book(tmp_path / "bad.xlsx", curtailments=rows)
    with pytest.raises(TraceError, match=match) as info:
        load_caiso(book, start=START, duration_s=H, step_s=300)
    assert info.value.where == str(book)


def test_missing_column_names_the_column(tmp_path):
    header = ["Date", "Hour", "Interval", "Wind Curtailment", "Reason"]
    book = write_book(tmp_path / "m.xlsx", curtailments=[(APR20, 1, 1, 0.0, "L")], curt_header=header)
    with pytest.raises(TraceError, match="solar curtailment"):
        load_caiso(book, start=START, duration_s=H, step_s=300)
    with pytest.raises(TraceError, match="'imports'"):
        load_caiso(book, start=START, duration_s=H, step_s=300, column="production:Imports")
    with pytest.raises(TraceError, match="unknown CAISO column"):
        load_caiso(book, start=START, duration_s=H, step_s=300, column="hydro")


def test_not_a_workbook_names_the_file(tmp_path):
    fake = tmp_path / "fake.xlsx"
    fake.write_text("this is not a zip file")
    with pytest.raises(TraceError, match="not a readable .xlsx workbook") as info:
        load_caiso(fake, start=START, duration_s=H, step_s=300)
    assert info.value.where == str(fake)
    assert "fake.xlsx" in str(info.value)


def test_missing_file_and_missing_sheet(tmp_path):
    with pytest.raises(TraceError) as info:
        load_caiso(tmp_path / "absent.xlsx", start=START, duration_s=H, step_s=300)
    assert info.value.where == str(tmp_path / "absent.xlsx")
    wb = openpyxl.Workbook()
    wb.active.title = "Summary"
    wb.save(tmp_path / "nosheet.xlsx")
    with pytest.raises(TraceError, match="no sheet 'Curtailments'"):
        load_caiso(tmp_path / "nosheet.xlsx", start=START, duration_s=H, step_s=300)


def test_data_not_covering_the_window(tmp_path):
    book = write_book(tmp_path / "c.xlsx", curtailments=[(APR20, 10, 1, 0.0, 100.0, "L")])
    with pytest.raises(TraceError, match="covers") as info:
        load_caiso(book, start=START, duration_s=2 * 86400, step_s=300)
    assert info.value.where == str(book)
    with pytest.raises(TraceError, match="covers"):
        load_caiso(book, start=datetime(2024, 4, 19, 23, tzinfo=PT), duration_s=H, step_s=300)
    gap = day_rows(APR20, [1, 2, 5, 6])
    with pytest.raises(TraceError, match="gap"):
        load_caiso(write_book(tmp_path / "g.xlsx", production=gap), start=START, duration_s=H,
                   step_s=300, column="production:Solar")


def test_duplicate_production_interval_is_an_error(tmp_path):
    rows = day_rows(APR20, [1, 2, 2, 3])
    with pytest.raises(TraceError, match="listed twice"):
        load_caiso(write_book(tmp_path / "d.xlsx", production=rows), start=START, duration_s=H,
                   step_s=300, column="production:Solar")


def test_naive_start_is_rejected(tmp_path):
    book = write_book(tmp_path / "c.xlsx", curtailments=[(APR20, 10, 1, 0.0, 100.0, "L")])
    with pytest.raises(TraceError, match="timezone-aware"):
        load_caiso(book, start=datetime(2024, 4, 20), duration_s=H, step_s=300)


def test_curtailments_as_csv(tmp_path):
    path = tmp_path / "curt.csv"
    path.write_text("Date,Hour,Interval,Wind Curtailment,Solar Curtailment,Reason\n"
                    "04/20/2024,10,1,,100,Local\n04/20/2024,10,1,2.5,0,System\n")
    tr = load_caiso(path, start=START, duration_s=86400, step_s=300, column="total_curtailment")
    assert tr.at(9 * H) == 102_500.0 and tr.at(10 * H) == 0.0
    with pytest.raises(TraceError, match="'load'"):
        load_caiso(path, start=START, duration_s=86400, step_s=300, column="production:Load")
