"""Seeded synthetic renewable-surplus (curtailment) windows, in kW.

The model, per day ``d`` of the scenario (``t = 0`` is taken as local midnight at the site):

* the number of windows is ``Poisson(windows_per_day)`` (so some days have none);
* each window's length is ``Gamma(shape=gamma_shape, scale=mean_window_h / gamma_shape)`` hours
  (shape 4 by default: mean ``mean_window_h``, coefficient of variation 1/sqrt(4) = 0.5, never
  negative, rarely shorter than a quarter of the mean);
* its centre is ``13:00 + offset_h`` local time plus ``Normal(0, centre_sd_h)`` hours when
  ``solar_centred`` (curtailment follows the midday solar peak; CAISO curtailment clusters
  around 10:00-16:00), else uniform over the day;
* its surplus level is ``capacity_kw * Uniform(0.6, 1.0)``, with small per-step multiplicative
  noise ``1 + noise_frac * Normal(0, 1)``, clipped to ``[0.5, 1.0] * capacity_kw``.

Outside windows the value is ``base_frac * capacity_kw``. With ``overlap="merge"`` (default)
overlapping windows merge (the overlap takes the higher level); note that solar-centred windows
overlap often (about a quarter of them at one window a day, 2.5 h mean, 2 h spread), so the
*observed* windows are fewer and longer than the parameters say. ``overlap="separate"`` instead
pushes a window that would overlap the previous one to start ``SEPARATE_GAP_H`` after it ends
(lengths and counts then match the parameters; centres drift a little later in the day).

Window edges are exact breakpoints of the trace (they are not rounded to the step grid), so
``trace.windows_above(t)`` for any ``base < t <= 0.5 * capacity`` returns exactly the merged
windows, and ``remaining_above`` gives the exact remaining window time.

Reproducibility: windows come from ``Generator(PCG64(seed))`` drawn day by day in a fixed order
(so a longer trace starts with the same windows as a shorter one), noise from a second stream
``Generator(PCG64([seed, 1]))``. The same arguments always give the same trace.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from testbed.spec.trace_sources import CurtailmentWindows
from testbed.traces.base import Trace
from testbed.traces.kinds import TraceContext

__all__ = ["Window", "auto_offsets_h", "curtailment_windows", "draw_windows", "merge_windows"]

DAY_S = 86400.0
SOLAR_NOON_H = 13.0
LEVEL_RANGE = (0.6, 1.0)
LEVEL_FLOOR = 0.5
SEPARATE_GAP_H = 0.5
OVERLAP_MODES = ("merge", "separate")


class Window(NamedTuple):
    """One drawn window: ``[start_s, end_s)`` at ``level_frac`` of capacity (before noise)."""

    start_s: float
    end_s: float
    level_frac: float


def _check(name: str, **positive: float) -> None:
    for key, value in positive.items():
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"{name}: {key} must be a finite number > 0, got {value}")


def draw_windows(*, duration_s: float, seed: int, mean_window_h: float, windows_per_day: float,
                 offset_h: float = 0.0, solar_centred: bool = True, gamma_shape: float = 4.0,
                 centre_sd_h: float = 2.0, overlap: str = "merge") -> list[Window]:
    """The drawn windows overlapping ``[0, duration_s)``, clipped to it, sorted by start.

    With ``overlap="merge"`` they may overlap (the trace merges them); with ``"separate"``
    overlapping windows have been pushed apart (see the module docstring).
    """
    if overlap not in OVERLAP_MODES:
        raise ValueError(f"draw_windows: overlap must be one of {OVERLAP_MODES}, got {overlap!r}")
    _check("draw_windows", duration_s=duration_s, mean_window_h=mean_window_h, gamma_shape=gamma_shape)
    if not (math.isfinite(windows_per_day) and windows_per_day >= 0):
        raise ValueError(f"draw_windows: windows_per_day must be >= 0, got {windows_per_day}")
    if not abs(offset_h) <= 24:
        raise ValueError(f"draw_windows: offset_h must be within +-24 h, got {offset_h}")
    rng = np.random.Generator(np.random.PCG64(seed))
    last_day = math.ceil(duration_s / DAY_S) + 1
    drawn: list[Window] = []
    for day in range(-2, last_day + 1):  # fixed start day: longer traces extend shorter ones
        k = int(rng.poisson(windows_per_day))
        if k == 0:
            continue
        if solar_centred:
            centre_h = SOLAR_NOON_H + offset_h + centre_sd_h * rng.standard_normal(k)
        else:
            centre_h = offset_h + 24.0 * rng.random(k)
        length_h = rng.gamma(gamma_shape, mean_window_h / gamma_shape, k)
        level = rng.uniform(*LEVEL_RANGE, k)
        for c, ln, lv in zip(centre_h, length_h, level):
            start = day * DAY_S + (c - ln / 2.0) * 3600.0
            drawn.append(Window(float(start), float(start + ln * 3600.0), float(lv)))
    drawn.sort()
    if overlap == "separate":
        drawn = _separate(drawn)
    out = [Window(max(w.start_s, 0.0), min(w.end_s, duration_s), w.level_frac) for w in drawn]
    return [w for w in out if w.start_s < w.end_s]


def _separate(windows: list[Window]) -> list[Window]:
    out: list[Window] = []
    for w in windows:  # sorted by start; earlier days first, so prefixes are stable
        if out and w.start_s < out[-1].end_s + SEPARATE_GAP_H * 3600.0:
            shift = out[-1].end_s + SEPARATE_GAP_H * 3600.0 - w.start_s
            w = Window(w.start_s + shift, w.end_s + shift, w.level_frac)
        out.append(w)
    return out


def merge_windows(windows: list[Window]) -> list[tuple[float, float]]:
    """Union of the windows as sorted, disjoint ``(start_s, end_s)`` intervals."""
    merged: list[list[float]] = []
    for w in sorted(windows):
        if merged and w.start_s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], w.end_s)
        else:
            merged.append([w.start_s, w.end_s])
    return [(a, b) for a, b in merged]


def curtailment_windows(*, duration_s: float, step_s: float, seed: int, mean_window_h: float,
                        windows_per_day: float, capacity_kw: float, base_frac: float = 0.0,
                        offset_h: float = 0.0, solar_centred: bool = True, name: str,
                        noise_frac: float = 0.03, gamma_shape: float = 4.0,
                        centre_sd_h: float = 2.0, overlap: str = "merge") -> Trace:
    """Renewable surplus in kW with seeded curtailment windows (model in the module docstring)."""
    _check(name, step_s=step_s, capacity_kw=capacity_kw)
    if not 0.0 <= base_frac < LEVEL_FLOOR:
        raise ValueError(f"{name}: base_frac must be in [0, {LEVEL_FLOOR}), got {base_frac}")
    if not (math.isfinite(noise_frac) and noise_frac >= 0):
        raise ValueError(f"{name}: noise_frac must be >= 0, got {noise_frac}")
    windows = draw_windows(duration_s=duration_s, seed=seed, mean_window_h=mean_window_h,
                           windows_per_day=windows_per_day, offset_h=offset_h,
                           solar_centred=solar_centred, gamma_shape=gamma_shape,
                           centre_sd_h=centre_sd_h, overlap=overlap)
    n_steps = max(1, math.ceil(duration_s / step_s - 1e-9))
    grid = step_s * np.arange(n_steps, dtype=np.float64)
    edges = [t for w in windows for t in (w.start_s, w.end_s) if 0.0 < t < duration_s]
    times = np.unique(np.concatenate((grid, np.asarray(edges, dtype=np.float64))))

    level = np.zeros(times.size)
    for w in windows:
        a = int(np.searchsorted(times, w.start_s, side="left"))
        b = int(np.searchsorted(times, w.end_s, side="left"))
        np.maximum(level[a:b], w.level_frac, out=level[a:b])

    noise_rng = np.random.Generator(np.random.PCG64([seed, 1]))
    noise = 1.0 + noise_frac * noise_rng.standard_normal(n_steps)
    step_of = np.searchsorted(grid, times, side="right") - 1
    inside = level > 0
    frac = np.where(inside, np.clip(level * noise[step_of], LEVEL_FLOOR, 1.0), base_frac)
    meta = {
        "generator": "curtailment_windows", "seed": seed, "mean_window_h": mean_window_h,
        "windows_per_day": windows_per_day, "offset_h": offset_h, "solar_centred": solar_centred,
        "gamma_shape": gamma_shape, "overlap": overlap, "windows": len(merge_windows(windows)),
    }
    return Trace(times, frac * capacity_kw, unit="kW", name=name, end_s=float(duration_s), meta=meta)


def auto_offsets_h(n_sites: int, *, span_h: float = 6.0) -> list[float]:
    """Per-site window-centre offsets spread evenly over ``[-span_h/2, +span_h/2]`` hours.

    Geo-distributed sites see their solar peak at different absolute times (about one hour per
    15 degrees of longitude). The default 6 h span is a continent-scale spread (e.g. US east to
    west coast plus neighbours): windows at neighbouring sites overlap partially, which is what
    makes migration between sites worth studying. One site gets 0. Pass explicit offsets
    (``-(lon_site - lon_ref) / 15``) when the site longitudes are known.
    """
    if n_sites < 1:
        raise ValueError(f"auto_offsets_h: n_sites must be >= 1, got {n_sites}")
    if n_sites == 1:
        return [0.0]
    return [float(x) for x in np.linspace(-span_h / 2.0, span_h / 2.0, n_sites)]


def build(src: CurtailmentWindows, ctx: TraceContext) -> Trace:
    """The trace of a ``kind: curtailment_windows`` source (its registry entry: :class:`testbed.spec.trace_sources.CurtailmentWindows`)."""
    sc = ctx.scenario
    start_hour_utc = sc.start.hour + sc.start.minute / 60.0
    extra = 0.0 if src.offset_h == "auto" else float(src.offset_h)
    # window centres follow the site's solar noon, expressed in scenario hours-of-day
    offset_h = extra - ctx.site.local_offset_h - start_hour_utc
    if abs(offset_h) > 24.0:  # e.g. UTC+14 and a 23:00 start: the same hour of day, a day earlier
        offset_h = math.fmod(offset_h, 24.0)
    return curtailment_windows(
        duration_s=ctx.horizon_s, step_s=ctx.step_s, seed=ctx.sub_seed(src.seed, "renewable", ctx.site_name),
        mean_window_h=src.mean_window_h, windows_per_day=src.windows_per_day, capacity_kw=src.capacity_kw,
        base_frac=src.base_frac, offset_h=offset_h, overlap=src.overlap, name=ctx.name,
    )
