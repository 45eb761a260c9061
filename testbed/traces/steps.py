"""Pure functions on step-function arrays (``times``, ``values``, ``end``) used by Trace."""

from __future__ import annotations

import math
from bisect import bisect_right
from typing import Any

import numpy as np

from testbed.errors import TraceError

__all__ = ["accumulate_until", "runs_above", "validated_arrays"]


def validated_arrays(times_s: Any, values: Any, end_s: float | None,
                     where: str) -> tuple[np.ndarray, np.ndarray, float]:
    """Float64 copies of times and values, and the end time; TraceError(where) if invalid:
    not 1-D, different lengths, empty, not finite, not strictly increasing, or a bad end."""
    try:
        times = np.array(times_s, dtype=np.float64)
        vals = np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise TraceError(where, "times and values must be numeric") from None
    if times.ndim != 1 or vals.ndim != 1:
        raise TraceError(where, f"times and values must be 1-D (got {times.ndim}-D, {vals.ndim}-D)")
    if times.size != vals.size:
        raise TraceError(where, f"{times.size} times but {vals.size} values")
    if times.size == 0:
        raise TraceError(where, "a trace needs at least one sample")
    for label, arr in (("times_s", times), ("values", vals)):
        bad = np.flatnonzero(~np.isfinite(arr))
        if bad.size:
            raise TraceError(where, f"{label}[{bad[0]}] is not finite (NaN, blank or infinite)")
    steps = np.diff(times)
    bad = np.flatnonzero(steps <= 0)
    if bad.size:
        i = int(bad[0]) + 1
        raise TraceError(where, f"times must strictly increase: times_s[{i}] is not after times_s[{i - 1}]")
    if end_s is None:
        if times.size == 1:
            raise TraceError(where, "a single-sample trace needs end_s")
        return times, vals, float(times[-1] + steps[-1])
    try:
        end = float(end_s)
    except (TypeError, ValueError) as e:
        raise TraceError(where, f"end_s must be a number, got {end_s!r}") from e
    if not math.isfinite(end) or end <= times[-1]:
        raise TraceError(where, f"end_s={end_s} must be finite and after the last time {times[-1]}")
    return times, vals, end


def runs_above(values: np.ndarray, edges: np.ndarray,
               threshold: float) -> tuple[list[tuple[float, float]], list[float]]:
    """Maximal windows ``(start, end)`` where ``values >= threshold``, and for each segment the
    end of the window containing it (NaN for segments below the threshold)."""
    above = values >= threshold
    step = np.diff(np.concatenate(([False], above, [False])).astype(np.int8))
    change = np.flatnonzero(step)
    starts, stops = change[0::2], change[1::2]  # window k = segments [starts[k], stops[k])
    windows = [(float(edges[a]), float(edges[b])) for a, b in zip(starts, stops)]
    run_id = np.cumsum(step[:-1] == 1) - 1
    run_end = np.full(values.size, np.nan)
    run_end[above] = edges[stops[run_id[above]]]
    return windows, run_end.tolist()


def accumulate_until(times: list[float], vals: list[float], edges: np.ndarray, cum: np.ndarray,
                     t0: float, amount: float) -> float | None:
    """Earliest ``t`` with integral ``amount > 0`` over ``[t0, t]``, or None if not by the end.

    ``cum[k]`` is the integral from ``times[0]`` to ``edges[k]`` and values are >= 0. The part
    in ``t0``'s own segment and the part in the last segment are computed directly, and the
    middle as a difference of ``cum`` -- the same split ``Trace.integrate`` uses, so the two
    agree to rounding. An amount short of the total only by rounding (1e-12 relative) is reached
    at the end of the last non-empty step.
    """
    n = len(times)
    if t0 >= edges[-1]:
        return None
    i0 = bisect_right(times, t0) - 1
    first = vals[i0] * (float(edges[i0 + 1]) - t0)
    if amount <= first:
        return min(t0 + amount / vals[i0], float(edges[i0 + 1]))
    need = amount - first
    base = float(cum[i0 + 1])
    k = max(int(np.searchsorted(cum, base + need, side="left")) - 1, i0 + 1)
    while k < n and vals[k] == 0.0:  # rounding can land on an empty step: move past it
        k += 1
    if k >= n:
        if need > float(cum[-1]) - base + 1e-12 * amount:
            return None
        last = next((i for i in range(n - 1, -1, -1) if vals[i] > 0.0), i0)
        return float(edges[last + 1])
    rest = need - float(cum[k] - base)
    t = times[k] + max(rest, 0.0) / vals[k]
    return min(max(t, times[k]), float(edges[k + 1]))
