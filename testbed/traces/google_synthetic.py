"""A seeded synthetic stand-in for the Google 2019 power traces (PowerData2019), per site.

PDU utilisation in the real data (and in ``traces/samples/google-power-sample.csv``) is a slow,
strongly autocorrelated series around a PDU-specific level (0.45-0.75 typical), with a mild
diurnal swing and a few percent of noise. The generator draws, from ``seed``:

    mean_i ~ U(mean_util_low, mean_util_high)               (one level per site)
    util(t) = clip(mean_i + diurnal_amp * sin(2 pi (h_local(t) - peak_h + 6) / 24)
                   + noise_sd * z(t), 0, 1)                   z: unit AR(1), correlation corr_h

on a 5-minute grid (the real traces' step), where ``h_local`` is the site's local solar hour and
the swing peaks at ``peak_h`` local time. Like the loader's ``mode: available``, the trace is the
power left to a training job on a site whose other tenants use ``util``:
``capacity_kw x (1 - util)``; ``mode: utilisation`` gives ``capacity_kw x util``.
"""

from __future__ import annotations

import math

import numpy as np

from testbed.spec.trace_sources import GoogleSynthetic
from testbed.traces.ar1 import ar1_standard
from testbed.traces.base import Trace
from testbed.traces.kinds import TraceContext

__all__ = ["google_like_power"]

STEP_S = 300.0


def google_like_power(*, duration_s: float, seed: int, capacity_kw: float, local_offset_h: float = 0.0,
                      start_hour_utc: float = 0.0, mean_util: tuple[float, float] = (0.45, 0.75),
                      diurnal_amp: float = 0.05, peak_h: float = 15.0, noise_sd: float = 0.04,
                      corr_h: float = 2.0, mode: str = "available", name: str = "google_like") -> Trace:
    if not capacity_kw > 0 or not duration_s > 0:
        raise ValueError(f"{name}: capacity_kw and duration_s must be > 0")
    lo, hi = mean_util
    if not 0 <= lo <= hi <= 1:
        raise ValueError(f"{name}: mean_util must satisfy 0 <= low <= high <= 1 (got {mean_util})")
    if mode not in ("available", "utilisation"):
        raise ValueError(f"{name}: mode must be available or utilisation (got {mode!r})")
    rng = np.random.default_rng(seed)
    n = int(math.ceil(duration_s / STEP_S))
    times = np.arange(n) * STEP_S
    level = rng.uniform(lo, hi)
    hour = (start_hour_utc + local_offset_h + times / 3600.0) % 24.0
    diurnal = diurnal_amp * np.sin(2 * np.pi * (hour - peak_h + 6.0) / 24.0)
    z = ar1_standard(n, step_s=STEP_S, corr_s=corr_h * 3600.0, rng=rng)
    util = np.clip(level + diurnal + noise_sd * z, 0.0, 1.0)
    values = capacity_kw * ((1.0 - util) if mode == "available" else util)
    meta = {"generator": "google_like_power", "seed": int(seed), "mean_util": float(level), "mode": mode}
    return Trace(times, values, unit="kW", name=name, end_s=float(n * STEP_S), meta=meta)


def build(src: GoogleSynthetic, ctx: TraceContext) -> Trace:
    """The trace of a ``kind: google_synthetic`` source (its registry entry: :class:`testbed.spec.trace_sources.GoogleSynthetic`)."""
    sc, site = ctx.scenario, ctx.site
    cap = src.capacity_kw or src.capacity_per_active * site.nodes * sc.node_type_of(ctx.site_name).p_active_kw
    return google_like_power(
        duration_s=ctx.horizon_s, seed=ctx.sub_seed(src.seed, "google_synthetic", ctx.site_name), capacity_kw=cap,
        local_offset_h=site.local_offset_h, start_hour_utc=sc.start.hour + sc.start.minute / 60.0,
        mean_util=src.mean_util, diurnal_amp=src.diurnal_amp, peak_h=src.peak_h, noise_sd=src.noise_sd,
        corr_h=src.corr_h, mode=src.mode, name=ctx.name,
    )
