"""Google 2019 data-centre power traces (github.com/google/cluster-data, PowerData2019).

CSV (optionally ``.csv.gz``) with columns ``time`` (microseconds since the trace epoch, 600 s
before 2019-05-01 00:00 America/Los_Angeles, i.e. the data start at ``time = 600e6``), ``cell``,
``pdu``, ``measured_power_util`` and ``production_power_util`` (fractions of the PDU's power
capacity in [0, 1], one sample per 5 minutes).

``load_google_power`` turns one column into kW for a site of ``capacity_kw``:

* rows are filtered to ``cell`` / ``pdu`` when given; otherwise all PDUs (of the cell) are
  averaged per 5-minute slot (times are bucketed to ``bucket_s`` = 300 s slots first, so PDUs
  sampled a few seconds apart still average together);
* ``mode="available"``: ``capacity_kw * (1 - util)`` -- the headroom a training job can draw
  from a power-capped site whose other tenants use ``util``;
  ``mode="utilisation"``: ``capacity_kw * util``;
* scenario ``t = 0`` is ``start_offset_s`` seconds after the trace start 2019-05-01 00:00 PT
  (:func:`google_trace_start`), the same absolute instant whatever PDU is loaded, so several
  sites replay simultaneous data.

Alignment to the scenario (:func:`replay_offset_s`, used for ``kind: google`` sources). The
trace's clock is US Pacific time (America/Los_Angeles; the whole of May 2019 is PDT). ``start``
is read on that clock, and ``t = 0`` replays the trace instant with:

* ``align="day"`` (default): the same Pacific wall-clock time of day as ``start``, on the
  trace's first day (2019-05-01);
* ``align="week"``: the same weekday and time of day, in the trace's first week (2019-05-01 is
  a Wednesday; a Monday start replays from Monday 2019-05-06);
* ``align="trace_start"``: the trace start, 2019-05-01 00:00 PT, whatever ``start`` is;

then ``offset_h`` hours later (any sign; e.g. ``offset_h: 168`` replays the following week).
The replay is continuous from there on: the alignment is made once, at ``t = 0``, so a
scenario that crosses a daylight-saving change keeps replaying in absolute time.

Missing (NaN) utilisation rows are dropped; a gap longer than ``max_gap_s`` between remaining
samples is an error (shorter gaps hold the previous value). Values outside [0, 1] are errors.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import numpy as np
import pandas as pd

from testbed.errors import TraceError
from testbed.spec.trace_sources import GooglePower
from testbed.traces.align import fit_window
from testbed.traces.base import Trace
from testbed.traces.fileerrors import check_header_line, missing_column, numeric_column, read_failure
from testbed.traces.kinds import TraceContext

__all__ = ["ALIGNS", "google_epoch", "google_trace_start", "load_google_power", "replay_offset_s"]

EPOCH_LEAD_S = 600.0
MODES = ("available", "utilisation")
ALIGNS = ("day", "week", "trace_start")
TRACE_TZ = "America/Los_Angeles"


def google_trace_start() -> datetime:
    """2019-05-01 00:00 America/Los_Angeles (PDT), where the 2019 traces begin (time = 600 s)."""
    return datetime(2019, 5, 1, 0, 0, tzinfo=ZoneInfo("America/Los_Angeles"))


def google_epoch() -> datetime:
    """The absolute instant of ``time == 0``: 600 s before :func:`google_trace_start`."""
    return google_trace_start() - timedelta(seconds=EPOCH_LEAD_S)


def replay_offset_s(start: datetime, *, align: str = "day", offset_h: float = 0.0) -> float:
    """Seconds after :func:`google_trace_start` of the trace instant replayed at scenario ``t = 0``
    (alignment rules in the module docstring)."""
    if align not in ALIGNS:
        raise ValueError(f"align must be one of {ALIGNS}, got {align!r}")
    if start.tzinfo is None or start.utcoffset() is None:
        raise ValueError(f"the scenario start must be timezone-aware, got {start!r}")
    base_s = 0.0
    if align != "trace_start":
        local = start.astimezone(ZoneInfo(TRACE_TZ))
        base_s = local.hour * 3600.0 + local.minute * 60.0 + local.second + local.microsecond / 1e6
        if align == "week":
            base_s += ((local.weekday() - google_trace_start().weekday()) % 7) * 86400.0
    return base_s + float(offset_h) * 3600.0


def _read(path: Path) -> pd.DataFrame:
    check_header_line(path, str(path))
    try:
        return pd.read_csv(path, compression="infer")
    except (OSError, ValueError, EOFError, pd.errors.ParserError, UnicodeDecodeError) as e:
        raise TraceError(str(path), f"cannot read Google power CSV: {read_failure(e)}") from None


def load_google_power(path: str | Path, *, column: str = "measured_power_util", cell: str | None = None,
                      pdu: str | None = None, capacity_kw: float, start_offset_s: float = 0.0,
                      duration_s: float, step_s: float | None, mode: str = "available",
                      name: str | None = None, bucket_s: float = 300.0,
                      max_gap_s: float = 3600.0) -> Trace:
    """Power in kW from a Google 2019 power CSV (semantics in the module docstring)."""
    path = Path(path)
    where = str(path)
    if mode not in MODES:
        raise ValueError(f"{where}: mode must be one of {MODES}, got {mode!r}")
    if not capacity_kw > 0:
        raise ValueError(f"{where}: capacity_kw must be > 0, got {capacity_kw}")
    df = _read(path)
    needed = ["time", column] + (["cell"] if cell is not None else []) + (["pdu"] if pdu is not None else [])
    for col in needed:
        if col not in df.columns:
            raise TraceError(where, missing_column(col, len(df.columns)))
    if cell is not None:
        df = df[df["cell"].astype(str) == str(cell)]
    if pdu is not None:
        df = df[df["pdu"].astype(str) == str(pdu)]
    if df.empty:
        raise TraceError(where, f"no rows for cell={cell!r} pdu={pdu!r}")
    time_us = numeric_column(df["time"], "time", where)
    util = numeric_column(df[column], column, where)
    keep = ~np.isnan(util)
    time_us, util = time_us[keep], util[keep]
    if util.size == 0:
        raise TraceError(where, f"column {column!r} has no values")
    bad = np.flatnonzero((util < 0) | (util > 1) | ~np.isfinite(util))
    if bad.size:
        raise TraceError(where, f"column {column!r}: a value outside [0, 1] (non-blank sample {int(bad[0]) + 1})")
    if not np.all(np.isfinite(time_us)):
        raise TraceError(where, "column 'time' has non-finite values")
    slot = np.floor(time_us / 1e6 / bucket_s).astype(np.int64)
    mean = pd.Series(util).groupby(slot).mean()  # average across PDUs per slot; sorted by slot
    t_epoch = mean.index.to_numpy(dtype=np.float64) * bucket_s
    gaps = np.diff(t_epoch)
    if gaps.size and gaps.max() > max_gap_s:
        i = int(np.argmax(gaps))
        raise TraceError(where, f"gap of {gaps[i]:g} s in the data after time={t_epoch[i] * 1e6:.0f} us "
                                f"(max_gap_s={max_gap_s:g})")
    frac = mean.to_numpy(dtype=np.float64)
    kw = capacity_kw * (1.0 - frac) if mode == "available" else capacity_kw * frac
    t = t_epoch - EPOCH_LEAD_S - float(start_offset_s)
    end_s = float(t[-1] + bucket_s)
    label = name or f"{path.name.split('.')[0]}:{column}:{mode}"
    try:
        trace = Trace(t, kw, unit="kW", name=label, end_s=end_s,
                      meta={"source": where, "column": column, "cell": cell, "pdu": pdu, "mode": mode,
                            "capacity_kw": capacity_kw, "start_offset_s": start_offset_s})
    except TraceError as e:
        raise TraceError(where, e.message) from e
    start = google_trace_start() + timedelta(seconds=float(start_offset_s))
    return fit_window(trace, duration_s=duration_s, step_s=step_s, where=where, start=start)


def build(src: GooglePower, ctx: TraceContext) -> Trace:
    """The trace of a ``kind: google`` source (its registry entry: :class:`testbed.spec.trace_sources.GooglePower`)."""
    offset_s = replay_offset_s(ctx.scenario.start, align=src.align, offset_h=src.offset_h)
    try:
        trace = load_google_power(
            Path(src.file), column=src.column, cell=src.cell, pdu=src.pdu, capacity_kw=src.capacity_kw,
            start_offset_s=offset_s, duration_s=ctx.scenario.duration_s, step_s=ctx.step_s,
            mode=src.mode, name=ctx.name,
        )
    except TraceError as e:
        if "covers" not in e.message:
            raise
        raise TraceError(e.where, f"{e.message} (align: {src.align}, offset_h: {src.offset_h:g})") from None
    return Trace(trace.times_s, trace.values, unit=trace.unit, name=trace.name, end_s=trace.end_s,
                 meta={**trace.meta, "align": src.align, "offset_h": src.offset_h})
