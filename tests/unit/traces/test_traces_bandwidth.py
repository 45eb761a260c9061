"""Bandwidth traces: variance around nominal and exact degradation events."""

from __future__ import annotations

import numpy as np
import pytest

from testbed.traces import DegradationEvent, Trace, bandwidth_trace, degrade, steady_degradation


def make(**kw):
    args = dict(nominal_bandwidth_gbps=10.0, duration_s=3600.0, step_s=60.0, seed=1, name="a-b")
    args.update(kw)
    return bandwidth_trace(**args)


def test_cv_zero_is_exactly_nominal():
    tr = make()
    assert tr.unit == "Gbit/s" and tr.start_s == 0 and tr.end_s == 3600
    assert np.all(tr.values == 10.0)
    assert tr.time_to_accumulate(0.0, 8 * 40) == 32.0  # 40 GB at 10 Gbit/s (Seed 1)


def test_events_reduce_by_the_fraction_exactly_within_their_span():
    ev = DegradationEvent(start_s=100.5, duration_s=299.25, degradation_frac=0.3)  # off the grid
    tr = make(events=[ev])
    assert tr.at(100.4999) == 10.0
    assert tr.at(100.5) == pytest.approx(7.0) and tr.at(399.7499) == pytest.approx(7.0)
    assert tr.at(399.75) == 10.0
    assert tr.windows_above(9.0) == [(0.0, 100.5), (399.75, 3600.0)]
    assert tr.integrate(0, 3600) == pytest.approx(10 * 3600 - 3.0 * 299.25, rel=1e-12)
    assert tr.integrate(100.5, 399.75) == pytest.approx(7.0 * 299.25, rel=1e-12)
    # A transfer that crosses the event edge finishes exactly when the integral says.
    t = tr.time_to_accumulate(50.0, 10 * 50.5 + 7 * 100)
    assert t == pytest.approx(200.5, rel=1e-12)


def test_overlapping_events_compose_and_floor_applies():
    evs = [DegradationEvent(0, 600, 0.5), DegradationEvent(300, 600, 0.5)]
    tr = make(events=evs, floor_frac=0.2)
    assert tr.at(100) == 5.0 and tr.at(700) == 5.0
    assert tr.at(400) == 2.5  # 10 * 0.5 * 0.5, above the 2.0 floor
    full = make(events=[DegradationEvent(1000, 100, 1.0)], floor_frac=0.01)
    assert full.at(1050) == pytest.approx(0.1)  # floored, so transfers never stall forever


def test_events_outside_the_trace_are_harmless():
    tr = make(events=[DegradationEvent(-100, 50, 0.5), DegradationEvent(5000, 10, 0.5)])
    assert np.all(tr.values == 10.0) and len(tr) == 60


def test_variance_has_requested_cv_and_mean_and_is_seeded():
    tr = make(cv=0.3, corr_s=600.0, duration_s=200 * 86400.0, step_s=300.0, floor_frac=0.0)
    v = tr.values
    assert v.mean() == pytest.approx(10.0, rel=0.03)
    assert v.std() / v.mean() == pytest.approx(0.3, rel=0.08)
    assert make(cv=0.3) == make(cv=0.3)
    assert make(cv=0.3) != make(cv=0.3, seed=2)
    assert make(cv=0.3).meta["seed"] == 1


def test_steady_degradation_and_degrade_on_any_trace():
    tr = steady_degradation(make(), 0.25)
    assert np.all(tr.values == 7.5)
    with pytest.raises(ValueError):
        steady_degradation(make(), 1.0)
    base = Trace([0.0, 10.0], [4.0, 8.0], unit="Gbit/s", name="x", end_s=20.0)
    d = degrade(base, [DegradationEvent(5.0, 10.0, 0.5)])
    assert d.times_s.tolist() == [0, 5, 10, 15] and d.values.tolist() == [4, 2, 4, 8]


@pytest.mark.parametrize(
    "kw",
    [dict(start_s=0, duration_s=0, degradation_frac=0.1), dict(start_s=0, duration_s=1, degradation_frac=1.5),
     dict(start_s=float("nan"), duration_s=1, degradation_frac=0.1)],
)
def test_event_validation(kw):
    with pytest.raises(ValueError):
        DegradationEvent(**kw)


@pytest.mark.parametrize("bad", [dict(nominal_bandwidth_gbps=0), dict(cv=-0.1), dict(step_s=0), dict(floor_frac=2)])
def test_generator_validation(bad):
    with pytest.raises(ValueError):
        make(**bad)
