"""Stationary Gaussian AR(1) noise: the exact discretisation of an Ornstein-Uhlenbeck process.

``z[0] ~ N(0, 1)``, ``z[i] = phi * z[i-1] + sqrt(1 - phi^2) * e[i]`` with
``phi = exp(-step_s / corr_s)``, so every ``z[i]`` is N(0, 1) and the autocorrelation at lag
``tau`` is ``exp(-tau / corr_s)``. Used by the cloud-cover and bandwidth-variance generators.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["ar1_standard"]


def ar1_standard(n: int, *, step_s: float, corr_s: float, rng: np.random.Generator) -> np.ndarray:
    """``n`` samples of a stationary, unit-variance AR(1) process (draws ``n`` normals from ``rng``)."""
    if n < 1:
        raise ValueError(f"ar1_standard: n must be >= 1, got {n}")
    if not (math.isfinite(step_s) and step_s > 0 and math.isfinite(corr_s) and corr_s > 0):
        raise ValueError(f"ar1_standard: step_s and corr_s must be > 0, got {step_s}, {corr_s}")
    from scipy.signal import lfilter  # imported here: scipy.signal costs most of a `validate`'s start-up

    e = rng.standard_normal(n)
    phi = math.exp(-step_s / corr_s)
    s = math.sqrt(1.0 - phi * phi)
    # y[i] = phi y[i-1] + s e[i]; the initial state makes y[0] = e[0] (stationary start).
    z, _ = lfilter([s], [1.0, -phi], e, zi=[(1.0 - s) * e[0]])
    return np.asarray(z, dtype=np.float64)
