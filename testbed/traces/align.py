"""Aligning loaded data to scenario time (seconds from the scenario's absolute start)."""

from __future__ import annotations

from datetime import datetime

import numpy as np
import pandas as pd

from testbed.errors import TraceError
from testbed.traces.base import Trace

__all__ = ["fit_window", "require_aware", "seconds_since"]


def require_aware(start: datetime, where: str) -> pd.Timestamp:
    """``start`` as a UTC Timestamp; TraceError if it is naive (scenario starts are absolute)."""
    if not isinstance(start, datetime) or start.tzinfo is None or start.utcoffset() is None:
        raise TraceError(where, f"the scenario start must be a timezone-aware datetime, got {start!r}")
    return pd.Timestamp(start).tz_convert("UTC")


def seconds_since(times: pd.DatetimeIndex | pd.Series, start: datetime, where: str) -> np.ndarray:
    """Seconds from ``start`` to each timezone-aware time (float64)."""
    t0 = require_aware(start, where)
    idx = pd.DatetimeIndex(times).tz_convert("UTC")
    delta = idx - t0
    return np.asarray(delta.total_seconds(), dtype=np.float64)


def fit_window(trace: Trace, *, duration_s: float | None, step_s: float | None, where: str,
               start: datetime | None = None) -> Trace:
    """Check that ``trace`` covers ``[0, duration_s)`` and cut (or resample) it to that window.

    With ``step_s`` the result is the exact per-step *mean* (energy-preserving; equal to the
    sample when the data's own step is ``step_s`` and aligned). ``duration_s=None`` keeps the
    data up to its end. Raises TraceError(where) when the data does not cover the window.
    """
    end = trace.end_s if duration_s is None else float(duration_s)
    if not end > 0:
        raise TraceError(where, f"duration must be > 0 (data ends at t={trace.end_s:g} s)")
    if trace.start_s > 0 or trace.end_s < end:
        have = f"[{trace.start_s:g}, {trace.end_s:g}) s"
        if start is not None:
            t0 = pd.Timestamp(start)
            have += (f" = [{t0 + pd.Timedelta(seconds=trace.start_s)}, "
                     f"{t0 + pd.Timedelta(seconds=trace.end_s)})")
        needs = f"[0, {end:g}) s" + (f" from its start {start}" if start is not None else "")
        raise TraceError(where, f"the data covers {have} of scenario time but the scenario needs {needs}")
    if step_s is not None:
        return trace.resample(step_s, 0.0, end, how="mean")
    return trace.sliced(0.0, end)
