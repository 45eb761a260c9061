"""Trace: construction, lookups, exact integrals, threshold windows, derived traces."""

from __future__ import annotations

import pickle
import time

import numpy as np
import pandas as pd
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from testbed.errors import TraceError, TraceRangeError
from testbed.traces import Trace


def step(times, values, end_s=None, name="t"):
    return Trace(times, values, unit="Gbit/s", name=name, end_s=end_s)


# ---------------------------------------------------------------------- construction
@pytest.mark.parametrize(
    ("times", "values", "end_s", "match"),
    [
        ([0.0, 1.0], [1.0], None, "2 times but 1 values"),
        ([], [], None, "at least one sample"),
        ([[0.0, 1.0]], [[1.0, 2.0]], None, "1-D"),
        ([0.0, 1.0, 1.0], [1.0, 2.0, 3.0], None, "strictly increase"),
        ([0.0, 2.0, 1.0], [1.0, 2.0, 3.0], None, "strictly increase"),
        ([0.0, 1.0], [1.0, float("nan")], None, r"values\[1\] is not finite"),
        ([0.0, float("inf")], [1.0, 2.0], None, "times_s"),
        ([0.0], [1.0], None, "single-sample trace needs end_s"),
        ([0.0, 1.0], [1.0, 2.0], 1.0, "after the last time"),
        ([0.0, 1.0], [1.0, 2.0], float("nan"), "end_s"),
        ([0.0, 1.0], ["a", "b"], None, "numeric"),
    ],
)
def test_construction_rejects_bad_input_naming_the_trace(times, values, end_s, match):
    with pytest.raises(TraceError, match=match) as info:
        step(times, values, end_s, name="link-a-b")
    assert info.value.where == "link-a-b"


def test_name_and_unit_are_required_and_typed():
    with pytest.raises(TraceError, match="non-empty name"):
        Trace([0, 1], [1, 1], unit="kW", name="")
    with pytest.raises(TraceError, match="unit"):
        Trace([0, 1], [1, 1], unit=None, name="x")  # type: ignore[arg-type]


def test_default_end_is_last_time_plus_last_interval_and_single_sample_with_end():
    assert step([0, 10, 30], [1, 2, 3]).end_s == 50.0
    one = step([5.0], [2.0], end_s=7.0)
    assert (one.start_s, one.end_s, len(one), one.at(6.9)) == (5.0, 7.0, 1, 2.0)


def test_trace_is_immutable_and_copies_its_input():
    times = np.array([0.0, 1.0])
    tr = step(times, [1.0, 2.0])
    times[0] = -5.0
    assert tr.start_s == 0.0
    with pytest.raises(AttributeError):
        tr.unit = "kW"  # type: ignore[misc]
    with pytest.raises(ValueError):
        tr.values[0] = 9.0
    assert tr.meta == {}
    with pytest.raises(TypeError):
        tr.meta["x"] = 1  # type: ignore[index]


def test_pickle_round_trip_and_equality():
    tr = Trace([0, 1], [3, 4], unit="kW", name="p", end_s=5, meta={"seed": 3})
    back = pickle.loads(pickle.dumps(tr))
    assert back == tr and back.meta == {"seed": 3} and back.name == "p"
    assert tr != tr.scaled(2.0)


# ---------------------------------------------------------------------- lookups
def test_at_is_step_hold_and_never_extrapolates():
    tr = step([0, 10, 20], [1, 2, 3], end_s=25)
    assert [tr.at(t) for t in (0, 9.999, 10, 19.5, 20, 24.999)] == [1, 1, 2, 2, 3, 3]
    for t in (-0.001, 25, 26, float("nan")):
        with pytest.raises(TraceRangeError, match="outside the trace range"):
            tr.at(t)


def test_at_many_matches_at_and_raises_out_of_range():
    tr = step([0, 10, 20], [1, 2, 3], end_s=25)
    ts = np.array([0, 5, 10, 15, 20, 24.5])
    assert tr.at_many(ts).tolist() == [tr.at(t) for t in ts]
    assert tr.at_many(ts.reshape(2, 3)).shape == (2, 3)
    with pytest.raises(TraceRangeError):
        tr.at_many(np.array([1.0, 25.0]))


# ---------------------------------------------------------------------- integrals
def test_integrate_is_exact_for_the_step_function():
    tr = step([0, 10, 20], [1, 0, 3], end_s=30)
    assert tr.integrate(0, 30) == 10 + 0 + 30
    assert tr.integrate(5, 25) == 5 + 0 + 15
    assert tr.integrate(12, 18) == 0
    assert tr.integrate(21, 21) == 0
    assert tr.integrate(25, 5) == -20
    with pytest.raises(TraceRangeError):
        tr.integrate(-1, 5)
    with pytest.raises(TraceRangeError):
        tr.integrate(0, 30.5)


def test_time_to_accumulate_exact_with_zero_stretches():
    tr = step([0, 10, 20, 30], [2, 0, 0, 4], end_s=40)
    assert tr.time_to_accumulate(0, 0) == 0
    assert tr.time_to_accumulate(0, 10) == 5
    assert tr.time_to_accumulate(0, 20) == 10  # earliest: the end of the first stretch
    assert tr.time_to_accumulate(0, 24) == 31  # skips the zero stretch 10..30
    assert tr.time_to_accumulate(12, 4) == 31  # starting inside a zero stretch
    assert tr.time_to_accumulate(5, 50) == 40  # reached exactly at end_s
    with pytest.raises(TraceRangeError, match="cannot be accumulated"):
        tr.time_to_accumulate(5, 50.001)
    with pytest.raises(TraceRangeError):
        tr.time_to_accumulate(40, 1)
    with pytest.raises(ValueError):
        tr.time_to_accumulate(0, -1)


def test_time_to_accumulate_transfer_of_bits_under_bandwidth():
    # 40 GB at 10 Gbit/s = 32 s (Seed 1), here with the rate halved from t = 10 s.
    gbps = step([0.0, 10.0], [10.0, 5.0], end_s=1000.0)
    bits_g = 8 * 40  # Gbit
    t = gbps.time_to_accumulate(0.0, bits_g)
    assert t == pytest.approx(10 + (320 - 100) / 5)
    assert gbps.integrate(0.0, t) == pytest.approx(320, rel=1e-12)


def test_accumulating_exactly_what_is_available_is_reached_despite_rounding():
    rng = np.random.default_rng(7)
    for _ in range(300):
        n = int(rng.integers(2, 30))
        vals = np.where(rng.random(n) < 0.3, 0.0, rng.uniform(1e-3, 1e4, n))
        times = np.concatenate(([0.0], np.cumsum(rng.uniform(0.01, 1e4, n - 1))))
        tr = step(times + rng.uniform(-1e5, 1e5), vals, end_s=None)
        t0 = tr.start_s + rng.random() * (tr.end_s - tr.start_s)
        available = tr.integrate(t0, tr.end_s)
        if available > 0:
            t = tr.time_to_accumulate(t0, available)
            assert t <= tr.end_s and tr.integrate(t0, t) == pytest.approx(available, rel=1e-9)


def test_time_to_accumulate_needs_non_negative_values():
    with pytest.raises(TraceError, match="non-negative"):
        step([0, 1], [1, -1]).time_to_accumulate(0, 0.5)


@st.composite
def step_traces(draw):
    n = draw(st.integers(1, 40))
    dts = draw(st.lists(st.floats(0.01, 1e4), min_size=n, max_size=n))
    vals = draw(st.lists(st.one_of(st.just(0.0), st.floats(1e-3, 1e4)), min_size=n, max_size=n))
    t0 = draw(st.floats(-1e5, 1e5))
    times = t0 + np.concatenate(([0.0], np.cumsum(dts[:-1])))
    assume(np.all(np.diff(times) > 0))
    return Trace(times, vals, unit="Gbit/s", name="h", end_s=float(t0 + np.sum(dts)))


@settings(max_examples=300, deadline=None)
@given(tr=step_traces(), u=st.floats(0.0, 1.0), f=st.floats(1e-6, 1.0))
def test_property_integrate_inverts_time_to_accumulate(tr, u, f):
    t0 = tr.start_s + u * (tr.end_s - tr.start_s)
    assume(t0 < tr.end_s)
    available = tr.integrate(t0, tr.end_s)
    assume(available > 0)
    amount = f * available
    t = tr.time_to_accumulate(t0, amount)
    assert t0 <= t <= tr.end_s
    got = tr.integrate(t0, t)
    # Relative 1e-9, plus the resolution of a float time times the largest rate.
    slack = 4 * np.finfo(float).eps * max(abs(tr.start_s), abs(tr.end_s)) * tr.values.max()
    assert abs(got - amount) <= 1e-9 * amount + slack
    # Earliest: a hair earlier falls short (unless nothing accrues in between).
    if t > t0 + 1e-6 * (tr.end_s - tr.start_s):
        assert tr.integrate(t0, t - 1e-6 * (tr.end_s - tr.start_s)) < amount


@settings(max_examples=200, deadline=None)
@given(tr=step_traces(), a=st.floats(0, 1), b=st.floats(0, 1))
def test_property_integrate_matches_vectorised_and_additive(tr, a, b):
    span = tr.end_s - tr.start_s
    t0, t1 = sorted((tr.start_s + a * span, tr.start_s + b * span))
    mid = (t0 + t1) / 2
    whole = tr.integrate(t0, t1)
    tol = 1e-9 * (abs(whole) + tr.values.max() * span)
    assert whole == pytest.approx(tr.integrate(t0, mid) + tr.integrate(mid, t1), abs=tol)
    assert whole == pytest.approx(float(tr.integrate_many(np.array([t0]), np.array([t1]))[0]), abs=tol)


# ---------------------------------------------------------------------- thresholds
def test_windows_above_and_remaining_above():
    tr = step([0, 10, 20, 30, 40], [5, 6, 1, 7, 8], end_s=50)
    assert tr.windows_above(5) == [(0.0, 20.0), (30.0, 50.0)]
    assert tr.windows_above(100) == []
    assert tr.windows_above(-1) == [(0.0, 50.0)]
    assert tr.remaining_above(3, 5) == 17
    assert tr.remaining_above(25, 5) == 0
    assert tr.remaining_above(35, 5) == 15  # stays above to end_s
    assert tr.remaining_above(15, 6) == 5
    assert tr.remaining_above(0, 7) == 0
    with pytest.raises(TraceRangeError):
        tr.remaining_above(50, 5)
    with pytest.raises(ValueError):
        tr.windows_above(float("nan"))


def test_remaining_above_agrees_with_windows_above_on_random_trace():
    rng = np.random.default_rng(4)
    tr = step(np.arange(500) * 300.0, rng.random(500), end_s=500 * 300.0)
    wins = tr.windows_above(0.5)
    for t in rng.uniform(0, tr.end_s, 500):
        inside = [b for a, b in wins if a <= t < b]
        assert tr.remaining_above(t, 0.5) == pytest.approx(inside[0] - t if inside else 0.0)


def test_ten_to_the_five_lookups_are_fast():
    """A 7-day 5-minute trace answers 1e5 at + remaining_above calls in well under a second."""
    rng = np.random.default_rng(0)
    tr = step(np.arange(2016) * 300.0, rng.random(2016) * 100, end_s=2016 * 300.0)
    ts = rng.uniform(0, tr.end_s, 100_000).tolist()
    tr.remaining_above(0.0, 50.0)  # the first call for a threshold precomputes its windows
    t_start = time.perf_counter()
    for t in ts:
        tr.at(t)
        tr.remaining_above(t, 50.0)
    elapsed = time.perf_counter() - t_start
    assert elapsed < 1.0, f"1e5 at+remaining_above took {elapsed:.3f} s"


# ---------------------------------------------------------------------- derived traces
def test_resample_sample_and_mean():
    tr = step([0, 10, 20], [1, 3, 5], end_s=30)
    s = tr.resample(5)
    assert s.times_s.tolist() == [0, 5, 10, 15, 20, 25] and s.values.tolist() == [1, 1, 3, 3, 5, 5]
    m = tr.resample(15, how="mean")
    assert m.values.tolist() == [(10 + 15) / 15, (15 + 50) / 15] and m.end_s == 30
    assert m.integrate(0, 30) == pytest.approx(tr.integrate(0, 30))
    part = tr.resample(4, start_s=2, end_s=12)
    assert part.times_s.tolist() == [2, 6, 10] and part.end_s == 12 and part.values.tolist() == [1, 1, 3]
    with pytest.raises(TraceRangeError):
        tr.resample(5, end_s=31)
    with pytest.raises(ValueError):
        tr.resample(0)
    with pytest.raises(ValueError):
        tr.resample(5, how="max")


def test_sliced_shifted_scaled_clipped_keep_unit_and_meta():
    tr = Trace([0, 10, 20], [1, 3, 5], unit="kW", name="s", end_s=30, meta={"seed": 1})
    sl = tr.sliced(5, 25)
    assert sl.times_s.tolist() == [5, 10, 20] and sl.values.tolist() == [1, 3, 5] and sl.end_s == 25
    assert tr.sliced(10, 20).values.tolist() == [3]
    assert tr.shifted(-10).start_s == -10 and tr.shifted(-10).end_s == 20
    sc = tr.scaled(1000, unit="W")
    assert sc.values.tolist() == [1000, 3000, 5000] and sc.unit == "W" and sc.meta == {"seed": 1}
    assert tr.clipped(2, 4).values.tolist() == [2, 3, 4]
    assert tr.clipped(hi=2).values.tolist() == [1, 2, 2]
    with pytest.raises(ValueError):
        tr.clipped(4, 2)
    with pytest.raises(TraceRangeError):
        tr.sliced(25, 35)


def test_frame_and_csv_round_trip(tmp_path):
    tr = Trace([0, 10, 20], [1.5, 3, 5], unit="kW", name="f", end_s=45)
    df = tr.to_frame()
    assert list(df.columns) == ["time_s", "value"] and df.attrs["end_s"] == 45
    assert Trace.from_frame(df, unit="kW", name="f") == tr
    path = tmp_path / "f.csv"
    df.to_csv(path, index=False)
    back = Trace.from_csv(path, unit="kW", end_s=45)
    assert back == tr and back.name == "f" and back.meta["source"] == str(path)
    assert Trace.from_csv(path, unit="kW").end_s == 30  # default: last + last interval


def test_from_csv_errors_name_the_file(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("time_s,val\n0,1\n")
    with pytest.raises(TraceError, match="missing column 'value'") as info:
        Trace.from_csv(bad, unit="kW")
    assert info.value.where == str(bad)
    backwards = tmp_path / "backwards.csv"
    pd.DataFrame({"time_s": [0, 2, 1], "value": [1, 2, 3]}).to_csv(backwards, index=False)
    with pytest.raises(TraceError, match="strictly increase") as info:
        Trace.from_csv(backwards, unit="kW")
    assert info.value.where == str(backwards)
    with pytest.raises(TraceError, match="cannot read"):
        Trace.from_csv(tmp_path / "missing.csv", unit="kW")
