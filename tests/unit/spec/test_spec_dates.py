"""Every instant a scenario implies is checked at validation against the date-times a run can
represent (pandas' Timestamp range), naming the field; and a scenario ``validate`` accepts runs on
sim without a traceback, whatever its start (a property test over starts near and past the bounds)."""

from __future__ import annotations

import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pandas as pd
import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from testbed.cli import main
from testbed.errors import SpecError
from testbed.spec import scenario_from_dict
from testbed.spec.dates import EARLIEST_S, LATEST_S, MARGIN_S, _PANDAS_MAX_S, _PANDAS_MIN_S
from tests.conftest import small_scenario_dict

UTC = timezone.utc
SOLAR = {"kind": "solar", "capacity_kw": 2.0}


def test_the_range_is_pandas_own_less_a_margin():
    assert _PANDAS_MIN_S == pytest.approx(pd.Timestamp.min.value / 1e9, abs=1e-5)
    assert _PANDAS_MAX_S == pytest.approx(pd.Timestamp.max.value / 1e9, abs=1e-5)
    assert pd.Timestamp.min.value / 1e9 < EARLIEST_S == _PANDAS_MIN_S + MARGIN_S
    assert LATEST_S == _PANDAS_MAX_S - MARGIN_S < pd.Timestamp.max.value / 1e9


def _scenario(start: str, duration_h: float = 24, solar: bool = False, **extra) -> dict:
    d = small_scenario_dict(start=start, duration_h=duration_h, step_s=900, policies=["static", "feasibility_aware"],
                            **extra)
    if solar:
        d["traces"]["renewable"]["a"] = SOLAR
    return d


@pytest.mark.parametrize("solar", [False, True])
def test_a_run_in_the_year_9999_is_refused_by_validate(tmp_path, capsys, solar):
    path = tmp_path / "late.yaml"
    path.write_text(yaml.safe_dump(_scenario("9999-12-31T00:00:00Z", solar=solar)))
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: {path}: start: 9999-12-31T00:00:00+00:00 is outside the date-times a run can represent "
                   "(1677-09-22T00:12:43Z to 2262-04-10T23:47:16Z)"]
    assert main(["run", str(path), "--out", str(tmp_path / "r")]) == 2  # refused the same way, no traceback
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(("field", "change"), [
    ("start", {"start": "1600-01-01T00:00:00Z"}),
    ("duration_h", {"start": "2262-04-09T00:00:00Z"}),
    ("traces.bandwidth.events[0].duration_h", {"start": "2200-01-01T00:00:00Z", "traces": {
        "renewable": {"default": {"kind": "curtailment_windows", "capacity_kw": 2.0}},
        "bandwidth": {"events": [{"link": "a-b", "start_h": 1, "duration_h": 1e6, "degradation_pct": 10}]}}}),
])
def test_each_instant_is_named_by_its_field(field, change):
    with pytest.raises(SpecError) as e:
        scenario_from_dict(_scenario("2024-01-01T00:00:00Z", **{k: v for k, v in change.items() if k != "start"})
                           | {"start": change["start"]})
    assert [w for w, _ in e.value.problems] == [field]


def test_the_last_day_that_fits_is_accepted():
    sc = scenario_from_dict(_scenario("2262-04-08T00:00:00Z", duration_h=24, solar=True))
    assert sc.start.year == 2262


# --------------------------------------------------------------------------- the property

_NEAR_LOW = st.datetimes(min_value=datetime(1677, 9, 19), max_value=datetime(1677, 9, 26))
_NEAR_HIGH = st.datetimes(min_value=datetime(2262, 4, 6), max_value=datetime(2262, 4, 12))
_ANY = st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30))
_STARTS = st.one_of(_NEAR_LOW, _NEAR_HIGH, _ANY)
_ZONES = st.sampled_from([0, -12, -5, 1, 9, 14]).map(lambda h: timezone(timedelta(hours=h)))


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(start=_STARTS, zone=_ZONES, duration_h=st.sampled_from([1, 6, 24, 48]), solar=st.booleans())
@example(start=datetime(9999, 12, 31), zone=UTC, duration_h=24, solar=False)
@example(start=datetime(9999, 12, 31), zone=UTC, duration_h=24, solar=True)
@example(start=datetime(2262, 4, 8), zone=UTC, duration_h=48, solar=True)
@example(start=datetime(1677, 9, 22, 1), zone=UTC, duration_h=6, solar=True)
def test_what_validate_accepts_runs_on_sim_without_a_traceback(capsys, start, zone, duration_h, solar):
    d = _scenario(start.replace(tzinfo=zone).isoformat(), duration_h=duration_h, solar=solar)
    d["workloads"]["jobs"] = [{**j, "arrival_h": 0} for j in d["workloads"]["jobs"]]
    d["policies"] = ["static"]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.yaml"
        path.write_text(yaml.safe_dump(d))
        if main(["validate", str(path)]) != 0:  # refused: in one line that names a date field
            err = capsys.readouterr().err.strip().splitlines()
            assert len(err) == 1 and err[0].startswith((f"error: {path}: start:", f"error: {path}: duration_h:")), err
            return
        # accepted: the run ends normally (an exception here fails the test with its traceback)
        code = main(["run", str(path), "--out", str(Path(tmp) / "r"), "--no-plots", "--no-progress"])
        assert code == 0, capsys.readouterr().err
        capsys.readouterr()
