"""Plain CSV time series: ``timestamp,value``.

``timestamp`` is either numeric (seconds since the scenario start) or ISO-8601 datetimes. ISO
timestamps need the scenario ``start`` (timezone-aware) to align them; timestamps without an
offset are read in ``start``'s time zone (an ambiguous or non-existent local time at a DST
change is an error: write offsets or UTC in such files). Values are multiplied by ``scale``.
The last sample holds for one more interval (the previous sample interval), or until
``duration_s`` for a one-row file.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd

from testbed.errors import TraceError
from testbed.spec.trace_sources import CsvSeries
from testbed.traces.align import fit_window, require_aware, seconds_since
from testbed.traces.base import Trace
from testbed.traces.fileerrors import check_header_line, missing_column, numeric_column, read_failure
from testbed.traces.kinds import TraceContext

__all__ = ["load_csv"]


def _parse_times(col: pd.Series, start: datetime | None, where: str) -> np.ndarray:
    if pd.api.types.is_numeric_dtype(col):
        return col.to_numpy(dtype=np.float64)
    if start is None:
        raise TraceError(where, "timestamps are datetimes: pass the scenario start to align them")
    require_aware(start, where)
    text = col.astype(str).str.strip()
    try:
        first = pd.to_datetime(text.iloc[:1], format="ISO8601")
        if first.dt.tz is not None:
            parsed = pd.DatetimeIndex(pd.to_datetime(text, format="ISO8601", utc=True))
        else:
            naive = pd.DatetimeIndex(pd.to_datetime(text, format="ISO8601"))
            if naive.tz is not None:
                raise TraceError(where, "cannot parse timestamps: mixed timestamps with and without UTC offsets")
            parsed = naive.tz_localize(start.tzinfo, ambiguous="raise", nonexistent="raise")
    except (ValueError, TypeError, OverflowError) as e:
        raise TraceError(where, f"cannot parse timestamps as numbers or ISO-8601: {_time_failure(text, e)}") from None
    return seconds_since(parsed, start, where)


def _time_failure(text: pd.Series, e: BaseException) -> str:
    """Which data row failed, and why in general terms (pandas' own message quotes the cell)."""
    kind = type(e).__name__.lower()
    if "ambiguous" in kind:
        return "a local time that happens twice at a DST change (write UTC offsets)"
    if "nonexistent" in kind:
        return "a local time that does not exist at a DST change (write UTC offsets)"
    try:
        parsed = pd.to_datetime(text, format="ISO8601", errors="coerce", utc=True)
    except (ValueError, TypeError, OverflowError):
        return "rows mix formats or time zones"
    bad = np.flatnonzero(parsed.isna().to_numpy())
    if bad.size:
        return f"data row {int(bad[0]) + 1} is neither"
    return "rows mix formats or time zones"


def load_csv(path: str | Path, *, unit: str, start: datetime | None = None,
             time_column: str = "timestamp", value_column: str = "value", scale: float = 1.0,
             duration_s: float | None = None, step_s: float | None = None,
             name: str | None = None) -> Trace:
    """Load a ``timestamp,value`` CSV as a Trace on scenario time (see the module docstring).

    With ``duration_s`` the data must cover ``[0, duration_s)``; with ``step_s`` it is
    resampled to per-step means. Errors name the file.
    """
    path = Path(path)
    where = str(path)
    check_header_line(path, where)
    try:
        df = pd.read_csv(path)
    except (OSError, ValueError, pd.errors.ParserError, UnicodeDecodeError) as e:
        raise TraceError(where, f"cannot read CSV: {read_failure(e)}") from None
    for col in (time_column, value_column):
        if col not in df.columns:
            raise TraceError(where, missing_column(col, len(df.columns)))
    if df.empty:
        raise TraceError(where, "no rows")
    times = _parse_times(df[time_column], start, where)
    values = numeric_column(df[value_column], value_column, where) * float(scale)
    end_s = float(duration_s) if (len(df) == 1 and duration_s is not None) else None
    try:
        trace = Trace(times, values, unit=unit, name=name or path.stem, end_s=end_s,
                      meta={"source": where, "scale": scale})
    except TraceError as e:
        raise TraceError(where, e.message) from e
    return fit_window(trace, duration_s=duration_s, step_s=step_s, where=where, start=start)


def build(src: CsvSeries, ctx: TraceContext) -> Trace:
    """The trace of a ``kind: csv`` source (its registry entry: :class:`testbed.spec.trace_sources.CsvSeries`)."""
    sc = ctx.scenario
    return load_csv(
        Path(src.file), unit=src.unit, start=sc.start, time_column=src.time_column,
        value_column=src.value_column, scale=src.scale, duration_s=sc.duration_s, step_s=ctx.step_s, name=ctx.name,
    )
