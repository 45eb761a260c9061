"""Synthetic curtailment windows: reproducible, statistically what the parameters say."""

from __future__ import annotations

import numpy as np
import pytest

from testbed.traces import auto_offsets_h, curtailment_windows, draw_windows
from testbed.traces.windows import merge_windows

DAY = 86400.0


def make(seed=1, days=7, **kw):
    args = dict(duration_s=days * DAY, step_s=300.0, seed=seed, mean_window_h=2.5,
                windows_per_day=1.0, capacity_kw=100.0, name="site-a")
    args.update(kw)
    return curtailment_windows(**args)


def test_reproducible_from_seed_and_different_for_other_seeds():
    assert make(seed=7) == make(seed=7)
    assert make(seed=7) != make(seed=8)
    assert make(seed=7).meta["seed"] == 7


def test_longer_trace_extends_a_shorter_one():
    short, long = make(seed=3, days=3), make(seed=3, days=10)
    cut = long.sliced(0, short.end_s)
    wins_short = short.windows_above(50)
    assert wins_short == [w for w in cut.windows_above(50)]
    ts = np.linspace(0, short.end_s, 2000, endpoint=False)
    np.testing.assert_array_equal(short.at_many(ts) > 50, cut.at_many(ts) > 50)


def test_values_within_capacity_base_outside_windows_and_unit():
    tr = make(base_frac=0.1, days=30)
    assert tr.unit == "kW" and tr.start_s == 0 and tr.end_s == 30 * DAY
    assert tr.values.min() == pytest.approx(10.0) and tr.values.max() <= 100.0
    inside = tr.values[tr.values > 10.0]
    assert inside.min() >= 50.0  # window level floor
    assert set(np.round(tr.values[tr.values < 50.0], 9)) == {10.0}


def test_window_edges_are_exact_breakpoints_and_merged():
    raw = draw_windows(duration_s=20 * DAY, seed=5, mean_window_h=2.5, windows_per_day=2.0)
    tr = make(seed=5, days=20, windows_per_day=2.0)
    assert tr.windows_above(50.0) == merge_windows(raw)
    assert tr.windows_above(1e-9) == merge_windows(raw)  # base 0 < any threshold <= 50% capacity
    assert tr.meta["windows"] == len(merge_windows(raw))
    a, b = tr.windows_above(50.0)[0]
    assert tr.remaining_above(a, 50.0) == pytest.approx(b - a)


@pytest.mark.parametrize("solar_centred", [True, False])
def test_mean_length_and_daily_count_over_a_long_horizon(solar_centred):
    days = 400
    raw = draw_windows(duration_s=days * DAY, seed=11, mean_window_h=2.5, windows_per_day=1.5,
                       solar_centred=solar_centred)
    lengths_h = np.array([w.end_s - w.start_s for w in raw]) / 3600
    assert len(raw) / days == pytest.approx(1.5, rel=0.08)  # Poisson mean
    assert lengths_h.mean() == pytest.approx(2.5, rel=0.06)  # gamma mean
    assert lengths_h.std() / lengths_h.mean() == pytest.approx(0.5, rel=0.15)  # shape 4 -> cv 1/2


def test_separate_mode_keeps_parameters_as_observed_statistics():
    days = 400
    tr = make(seed=13, days=days, windows_per_day=2.0, overlap="separate")
    wins = tr.windows_above(50.0)
    lengths_h = np.array([b - a for a, b in wins]) / 3600
    assert len(wins) / days == pytest.approx(2.0, rel=0.08)
    assert lengths_h.mean() == pytest.approx(2.5, rel=0.06)
    merged = make(seed=13, days=days, windows_per_day=2.0).windows_above(50.0)
    assert len(merged) < len(wins)  # merging makes fewer, longer windows


def test_solar_centred_windows_cluster_around_one_pm_plus_offset():
    for offset in (0.0, 3.0):
        raw = draw_windows(duration_s=200 * DAY, seed=2, mean_window_h=2.0, windows_per_day=1.0,
                           offset_h=offset)
        centres_h = np.array([((w.start_s + w.end_s) / 2) % DAY for w in raw if 0 < w.start_s]) / 3600
        assert np.median(centres_h) == pytest.approx(13.0 + offset, abs=0.5)
        assert np.std(centres_h) == pytest.approx(2.0, rel=0.25)
    uniform = draw_windows(duration_s=200 * DAY, seed=2, mean_window_h=2.0, windows_per_day=1.0,
                           solar_centred=False)
    centres_h = np.array([((w.start_s + w.end_s) / 2) % DAY for w in uniform]) / 3600
    assert np.std(centres_h) > 5.0


def test_zero_windows_per_day_gives_base_only():
    tr = make(windows_per_day=0.0, base_frac=0.2)
    assert tr.windows_above(50) == [] and np.all(tr.values == 20.0)


@pytest.mark.parametrize(
    "bad",
    [dict(mean_window_h=0), dict(windows_per_day=-1), dict(capacity_kw=0), dict(step_s=0),
     dict(base_frac=0.6), dict(overlap="stack"), dict(offset_h=30)],
)
def test_invalid_parameters_raise(bad):
    with pytest.raises(ValueError):
        make(**bad)


def test_auto_offsets_spread_symmetrically():
    assert auto_offsets_h(1) == [0.0]
    assert auto_offsets_h(5) == [-3.0, -1.5, 0.0, 1.5, 3.0]
    assert auto_offsets_h(3, span_h=2.0) == [-1.0, 0.0, 1.0]
    with pytest.raises(ValueError):
        auto_offsets_h(0)
