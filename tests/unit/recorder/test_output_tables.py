"""The shape of output tables (testbed/recorder/tables.py) and the names read from older results
(testbed/analysis/names.py)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

import pandas as pd
import pytest

from testbed.analysis.names import UNTYPED_BEFORE, current, current_columns, current_name, typed_as_today
from testbed.recorder.tables import dtypes_of, split_series, tidy_traces, typed, with_policy, with_time


@dataclass
class Row:
    a: float | None = None
    n: int | None = None
    ok: bool | None = None
    why: str = ""
    other: list | None = None


def test_a_column_with_no_value_keeps_its_dtype_through_parquet(tmp_path):
    dtypes = dtypes_of(Row)
    assert dtypes == {"a": "float64", "n": "Int64", "ok": "boolean", "why": "str"}
    df = typed(pd.DataFrame([{"a": None, "n": None, "ok": None, "why": None}] * 2), dtypes)
    df.to_parquet(tmp_path / "t.parquet")
    back = pd.read_parquet(tmp_path / "t.parquet")
    assert {c: str(t) for c, t in back.dtypes.items()} == dtypes
    assert back["a"].isna().all() and back["n"].isna().all() and back["ok"].isna().all()


def test_time_is_utc_beside_its_offset_from_a_naive_or_an_aware_start():
    df = pd.DataFrame({"x": [1, 2], "t_s": [0.0, 90.0]})
    for start in (datetime(2024, 6, 1), datetime(2024, 6, 1, 2, tzinfo=timezone.utc).astimezone()):
        out = with_time(df, start)
        assert list(out.columns) == ["x", "t_s", "time"] and str(out["time"].dtype) == "datetime64[us, UTC]"
        assert out["time"].iloc[1] - out["time"].iloc[0] == pd.Timedelta(seconds=90)
    assert with_time(df, datetime(2024, 6, 1))["time"].iloc[0] == pd.Timestamp("2024-06-01T00:00:00Z")
    assert "time" not in with_time(df.drop(columns="t_s"), datetime(2024, 6, 1))
    assert list(with_policy(df.assign(policy="old"), "p", "p-1").columns) == ["policy", "label", "x", "t_s"]
    assert set(with_policy(df.assign(policy="old"), "p", "p-1")["policy"]) == {"p"}


def test_traces_are_long_with_site_or_link_quantity_and_unit():
    frame = pd.DataFrame({"time_s": [0.0, 300.0], "value": [1.0, 2.0]})
    tr = tidy_traces([("renewable_kw:rome", frame), ("bandwidth_gbps:rome->milan", frame)], datetime(2024, 6, 1))
    assert list(tr.columns) == ["t_s", "time", "site", "link", "quantity", "unit", "value"]
    assert tr[["site", "link", "quantity", "unit"]].fillna("").values.tolist() == [
        ["rome", "", "renewable_power", "kW"]] * 2 + [["", "rome->milan", "bandwidth", "Gbit/s"]] * 2
    assert split_series("probe_kw:a") == ("probe", "kW", "a", None)  # another study's series: unit from its name
    for bad in ("renewable_kw", "probe:a", "renewable_kw:"):
        with pytest.raises(ValueError, match="QUANTITY_UNIT"):
            split_series(bad)


def test_summaries_written_before_the_rename_read_under_todays_names():
    old = {"non_renewable_kwh": 3.0, "pooled_bound_non_renewable_kwh": 1.0, "mean_jct_h": 2.0,
           "max_breakeven_min": 1.5, "time_to_accuracy_h": None}
    assert current(old) == {"grid_kwh": 3.0, "pooled_bound_grid_kwh": 1.0, "mean_jct_s": 7200.0,
                            "max_breakeven_s": 90.0, "time_to_accuracy_s": None}  # every duration in seconds
    assert current({"mean_jct_s": 5.0, "mean_jct_h": 2.0}) == {"mean_jct_s": 5.0}  # today's name wins
    assert current({"grid_kwh": 4.0, "non_renewable_kwh": 3.0}) == {"grid_kwh": 4.0}
    assert current_name("non_renewable_kwh_per_gpu_h") == "grid_kwh_per_gpu_h" and current_name("x") == "x"


def test_migrations_written_before_the_rename_read_checkpoint_gb():
    old = pd.DataFrame({"job_id": ["j1"], "size_gb": [40.0]})
    assert list(current_columns("migrations", old).columns) == ["job_id", "checkpoint_gb"]
    assert current_columns("migrations", old)["checkpoint_gb"].tolist() == [40.0]
    both = pd.DataFrame({"size_gb": [1.0], "checkpoint_gb": [2.0]})  # today's name wins
    assert current_columns("migrations", both).to_dict("list") == {"checkpoint_gb": [2.0]}
    assert current_columns("jobs", old) is old  # only the migrations table had the old name


def test_tables_written_before_in_other_units_read_in_todays():
    jobs = pd.DataFrame({"job_id": ["a", "b"], "status": ["done", "running"], "jct_h": [2.0, None],
                         "queue_wait_h": [0.5, 0.0]})
    now = current_columns("jobs", jobs)
    assert list(now.columns) == ["job_id", "status", "jct_s", "queue_wait_s"]
    assert now["jct_s"].tolist()[0] == 7200.0 and pd.isna(now["jct_s"].tolist()[1])
    assert now["queue_wait_s"].tolist() == [1800.0, 0.0] and now["status"].tolist() == ["completed", "running"]
    assert jobs["jct_h"].tolist()[0] == 2.0  # the caller's frame is left as it was
    migs = current_columns("migrations", pd.DataFrame({"predicted_breakeven_min": [1.5]}))
    assert migs.to_dict("list") == {"predicted_breakeven_s": [90.0]}


def test_columns_an_older_recorder_left_untyped_read_in_todays_dtypes():
    from testbed.controller.records import MIGRATION_DTYPES

    assert all(MIGRATION_DTYPES[c] == t for c, t in UNTYPED_BEFORE["migrations"].items())
    old = pd.DataFrame({"job_id": ["j"], "actual_total_s": pd.Series([None], dtype=object),
                        "contended": pd.Series([None], dtype=object), "measured_io_bytes": pd.Series([7], dtype=object)})
    now = typed_as_today("migrations", old)
    assert {c: str(t) for c, t in now.dtypes.items()} == {"job_id": str(old["job_id"].dtype), "actual_total_s": "float64",
                                                          "contended": "boolean", "measured_io_bytes": "Int64"}
    assert typed_as_today("jobs", old) is old


def test_a_sweep_asking_for_an_old_metric_name_is_told_the_new_one():
    from testbed.errors import SpecError
    from testbed.sweep.aggregate import _metric_names

    with pytest.raises(SpecError, match="'non_renewable_kwh' is now called 'grid_kwh'"):
        _metric_names([{"policy": "static", "grid_kwh": 1.0}], ["non_renewable_kwh"], "s.yaml")


def test_federated_energy_written_before_the_rename_reads_grid_and_renewable_kwh():
    old = {"energy_kwh": 3.0, "energy_grid_kwh": 1.0, "energy_renewable_kwh": 2.0}
    assert current(old) == {"energy_kwh": 3.0, "grid_kwh": 1.0, "renewable_kwh": 2.0}
    for table in ("rounds", "sites"):
        df = current_columns(table, pd.DataFrame([old]))
        assert df.to_dict("list") == {"energy_kwh": [3.0], "grid_kwh": [1.0], "renewable_kwh": [2.0]}


def test_a_sweep_metric_with_a_typo_gets_a_did_you_mean():
    from testbed.errors import SpecError
    from testbed.sweep.aggregate import _metric_names

    with pytest.raises(SpecError, match=r"no summary column 'mean_jct' \(did you mean mean_jct_s\?\) \(known: "):
        _metric_names([{"policy": "static", "mean_jct_s": 1.0, "grid_kwh": 2.0}], ["mean_jct"], "s.yaml")


def test_a_federated_comparison_written_before_reads_in_todays_units():
    from testbed.analysis.report_data import current_comparison

    old = {"by_model": {}, "policies": {"powertrip": {"time_to_accuracy_h": 0.5, "end_time_h": 2.0, "reached": True}}}
    assert current_comparison(old)["policies"]["powertrip"] == {"time_to_accuracy_s": 1800.0, "end_time_s": 7200.0,
                                                                "reached": True}
    assert current_comparison({"x": 1}) == {"x": 1}
