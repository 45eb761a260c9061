"""Seeded synthetic signal with a daily shape (carbon intensity, electricity price).

``value(t) = mean x (1 + amplitude_frac x cos(2 pi (h(t) - peak_h) / 24)) x m(t)``

* ``h(t)`` is the local hour at the middle of each step: UTC hour of ``start + t`` plus the
  site's ``utc_offset_h``, so a site's evening peak falls in its own evening;
* ``m(t) = exp(sigma z - sigma^2 / 2)`` with ``z`` a stationary AR(1) (:mod:`testbed.traces.ar1`,
  correlation time ``corr_h``) and ``sigma^2 = ln(1 + noise_cv^2)``: mean 1, coefficient of
  variation exactly ``noise_cv``; ``noise_cv = 0`` gives the shape alone. Seeded by
  ``Generator(PCG64(seed))``, one draw per step.

With ``amplitude_frac <= 1`` every value is >= 0.
"""

from __future__ import annotations

import math
from datetime import datetime

import numpy as np
import pandas as pd

from testbed.errors import TraceError
from testbed.traces.ar1 import ar1_standard
from testbed.traces.base import Trace

__all__ = ["daily_signal"]


def daily_signal(*, duration_s: float, step_s: float, start: datetime, utc_offset_h: float, mean: float,
                 amplitude_frac: float, peak_h: float, noise_cv: float, corr_h: float, seed: int,
                 unit: str, name: str) -> Trace:
    """The signal over ``[0, duration_s)`` on the ``step_s`` grid (model in the module docstring)."""
    if start.tzinfo is None or start.utcoffset() is None:
        raise TraceError(name, "start must be a timezone-aware datetime")
    for key, value in (("duration_s", duration_s), ("step_s", step_s), ("corr_h", corr_h)):
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"{name}: {key} must be a finite number > 0, got {value}")
    if not (math.isfinite(mean) and mean >= 0):
        raise ValueError(f"{name}: mean must be >= 0, got {mean}")
    if not 0.0 <= amplitude_frac <= 1.0:
        raise ValueError(f"{name}: amplitude_frac must be in [0, 1], got {amplitude_frac}")
    if not (math.isfinite(noise_cv) and noise_cv >= 0):
        raise ValueError(f"{name}: noise_cv must be >= 0, got {noise_cv}")
    n = max(1, math.ceil(duration_s / step_s - 1e-9))
    t = step_s * np.arange(n, dtype=np.float64)
    mid = np.minimum(t + step_s / 2.0, (t + float(duration_s)) / 2.0)
    start_utc = pd.Timestamp(start).tz_convert("UTC")
    utc_h = (start_utc.hour + start_utc.minute / 60.0 + start_utc.second / 3600.0) + mid / 3600.0
    local_h = np.mod(utc_h + utc_offset_h, 24.0)
    shape = 1.0 + amplitude_frac * np.cos(2.0 * math.pi * (local_h - peak_h) / 24.0)
    if noise_cv == 0.0:
        mult = np.ones(n)
    else:
        z = ar1_standard(n, step_s=step_s, corr_s=corr_h * 3600.0, rng=np.random.Generator(np.random.PCG64(seed)))
        sigma = math.sqrt(math.log1p(noise_cv * noise_cv))
        mult = np.exp(sigma * z - sigma * sigma / 2.0)
    values = np.maximum(mean * shape * mult, 0.0)
    meta = {"generator": "daily_signal", "seed": seed, "mean": mean, "amplitude_frac": amplitude_frac,
            "peak_h": peak_h, "noise_cv": noise_cv, "corr_h": corr_h, "utc_offset_h": utc_offset_h,
            "start": start.isoformat()}
    return Trace(t, values, unit=unit, name=name, end_s=float(duration_s), meta=meta)
