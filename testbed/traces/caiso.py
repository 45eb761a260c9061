"""CAISO "Production and Curtailments" data (workbook .xlsx, or the same tables as CSV).

Sheet ``Curtailments``: ``Date, Hour`` (1-24, hour-ending), ``Interval`` (1-12, five minutes),
``Wind Curtailment``, ``Solar Curtailment``, ``Reason``, in MW. Only intervals *with*
curtailment are listed: a missing interval is 0 MW, and rows repeating an interval (e.g. one
``Local`` and one ``System`` row) are summed. The data cover whole local days, from the first
to the last ``Date`` listed.

Sheet ``Production``: one row per 5-minute interval with ``Date, Hour, Interval`` and columns
such as ``Load, Solar, Wind, Net Load, Renewables, ...`` (whatever is there; selected by name,
case- and whitespace-insensitively). Blank values drop the row; a gap longer than ``max_gap_s``
is an error, shorter gaps hold the previous value. A repeated interval is an error.

``column``: ``"solar_curtailment"``, ``"wind_curtailment"``, ``"total_curtailment"`` (their sum)
or ``"production:<Column>"``. The header row is found among the first rows (the one naming Date,
Hour and Interval), so title rows above it are fine. Time labels and DST rules are in
:mod:`testbed.traces.caiso_time`. Values are MW; the result is kW (x1000), or, with
``scale_to_kw``, scaled so that its maximum over the scenario window is ``scale_to_kw`` (a
window with no curtailment stays all-zero). A scenario's ``kind: caiso`` source must give
``scale_to_kw`` (:class:`testbed.spec.trace_sources.Caiso`): grid-scale MW read as kW would
feed one site hundreds of MW. The result covers ``[0, duration_s)`` at
``step_s`` (per-step means; see :func:`testbed.traces.align.fit_window`).
"""

from __future__ import annotations

import warnings
import zipfile
from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd

from testbed.errors import TraceError
from testbed.spec.trace_sources import Caiso
from testbed.traces.align import fit_window, seconds_since
from testbed.traces.base import Trace
from testbed.traces.caiso_time import CAISO_TZ, interval_starts_utc
from testbed.traces.fileerrors import check_header_line, numeric_column, read_failure
from testbed.traces.kinds import TraceContext

__all__ = ["load_caiso", "read_caiso_table"]

CURTAILMENT_COLUMNS = {
    "solar_curtailment": ("solar curtailment",),
    "wind_curtailment": ("wind curtailment",),
    "total_curtailment": ("solar curtailment", "wind curtailment"),
}
KEYS = ("date", "hour", "interval")
INTERVAL_S = 300.0
_HEADER_SEARCH_ROWS = 30


def _norm(label: object) -> str:
    return " ".join(str(label).split()).lower()


def _parse_column(column: str, where: str) -> tuple[str, tuple[str, ...]]:
    if column in CURTAILMENT_COLUMNS:
        return "Curtailments", CURTAILMENT_COLUMNS[column]
    if column.lower().startswith("production:") and column.split(":", 1)[1].strip():
        return "Production", (_norm(column.split(":", 1)[1]),)
    raise TraceError(where, f"unknown CAISO column {column!r}: use one of {sorted(CURTAILMENT_COLUMNS)} "
                            "or 'production:<Column>'")


def _read_raw(path: Path, sheet: str, where: str) -> pd.DataFrame:
    name = path.name.lower()
    if name.endswith((".csv", ".csv.gz")):
        check_header_line(path, where)
        try:
            return pd.read_csv(path, header=None, dtype=object, skip_blank_lines=True)
        except (OSError, ValueError, pd.errors.ParserError, UnicodeDecodeError) as e:
            raise TraceError(where, f"cannot read CSV: {read_failure(e)}") from None
    try:
        from openpyxl.utils.exceptions import InvalidFileException  # imported here: only workbooks need it
    except ImportError:  # an optional dependency (extra 'xlsx'): the CSV export needs none
        raise TraceError(where, "reading an .xlsx workbook needs openpyxl: pip install -e '.[xlsx]' "
                                "(scripts/setup.sh does), or give the same table as CSV") from None

    try:
        with warnings.catch_warnings():  # real workbooks trip openpyxl's style/extension notices
            warnings.filterwarnings("ignore", category=UserWarning, module=r"openpyxl(\.|$)")
            with pd.ExcelFile(path, engine="openpyxl") as book:
                sheets = {_norm(s): s for s in book.sheet_names}
                if _norm(sheet) not in sheets:
                    n = len(book.sheet_names)
                    raise TraceError(where, f"no sheet {sheet!r} in the workbook (it has {n} other "
                                            f"sheet{'s' if n != 1 else ''})")
                return pd.read_excel(book, sheet_name=sheets[_norm(sheet)], header=None)
    except TraceError:
        raise
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, InvalidFileException) as e:
        raise TraceError(where, f"not a readable .xlsx workbook: {read_failure(e)}") from None


def read_caiso_table(path: str | Path, sheet: str) -> tuple[pd.DataFrame, int]:
    """The table below the header row, columns normalised (lower case), and the file row
    number (1-based) of its first data row. Fully blank rows are dropped."""
    path = Path(path)
    where = str(path)
    raw = _read_raw(path, sheet, where)
    for r in range(min(_HEADER_SEARCH_ROWS, len(raw))):
        labels = [_norm(c) for c in raw.iloc[r].tolist()]
        if all(k in labels for k in KEYS):
            table = raw.iloc[r + 1:].copy()
            table.columns = labels
            table = table.loc[:, ~table.columns.duplicated()]
            table = table.dropna(how="all", subset=list(KEYS))
            return table.reset_index(drop=True), r + 2
    raise TraceError(where, f"{sheet}: no header row naming Date, Hour and Interval")


def _dates(col: pd.Series, where: str) -> pd.DatetimeIndex:
    if pd.api.types.is_datetime64_any_dtype(col):
        parsed = pd.to_datetime(col)
    else:
        parsed = None
        for fmt in ("ISO8601", "%m/%d/%Y", "%m/%d/%y", "mixed"):
            try:
                parsed = pd.to_datetime(col, format=fmt)
                break
            except (ValueError, TypeError):
                continue
        if parsed is None:
            parsed = pd.to_datetime(col, format="mixed", errors="coerce")
            bad = np.flatnonzero(pd.isna(parsed) & col.notna().to_numpy())
            row = f" (data row {int(bad[0]) + 1})" if bad.size else ""
            raise TraceError(where, f"cannot parse the Date column{row}: write dates as MM/DD/YYYY or ISO-8601")
    idx = pd.DatetimeIndex(parsed)
    if idx.tz is not None:
        idx = idx.tz_localize(None)
    if idx.isna().any():
        raise TraceError(where, "the Date column has blank cells")
    return idx.normalize()


def _integers(col: pd.Series, label: str, where: str) -> np.ndarray:
    try:
        x = numeric_column(col, label, where)
    except TraceError as e:
        raise TraceError(where, e.message.replace("must be numeric", "must be whole numbers")) from None
    if not np.all(np.isfinite(x) & (x == np.round(x))):
        raise TraceError(where, f"column {label!r} must be whole numbers with no blanks")
    return x.astype(np.int64)


def _numbers(col: pd.Series, label: str, where: str) -> np.ndarray:
    return numeric_column(col, label, where)


def load_caiso(path: str | Path, *, start: datetime, duration_s: float, step_s: float | None,
               column: str = "solar_curtailment", scale_to_kw: float | None = None,
               name: str | None = None, hour_labels: str = "wall", max_gap_s: float = 3600.0) -> Trace:
    """Load one CAISO series as kW on scenario time (semantics in the module docstring)."""
    path = Path(path)
    where = str(path)
    sheet, wanted = _parse_column(column, where)
    if scale_to_kw is not None and not scale_to_kw > 0:
        raise ValueError(f"{where}: scale_to_kw must be > 0, got {scale_to_kw}")
    table, first_row = read_caiso_table(path, sheet)
    for label in wanted:
        if label not in table.columns:
            have = len([c for c in table.columns if c != "nan"])
            raise TraceError(where, f"{sheet}: missing column {label!r} (the header row has {have} other columns)")
    if table.empty:
        raise TraceError(where, f"{sheet}: no data rows")
    dates = _dates(table["date"], where)
    hours = _integers(table["hour"], "Hour", where)
    intervals = _integers(table["interval"], "Interval", where)
    mw = sum(np.nan_to_num(_numbers(table[c], c, where)) for c in wanted) if sheet == "Curtailments" \
        else _numbers(table[wanted[0]], wanted[0], where)
    key = table[["reason"]] if (sheet == "Curtailments" and "reason" in table.columns) else None
    starts, exists = interval_starts_utc(pd.Series(dates), hours, intervals, repeat_key=key,
                                         hour_labels=hour_labels, where=where, first_row=first_row)
    meta = {"source": where, "column": column, "hour_labels": hour_labels,
            "dst_dropped_rows": int((~exists).sum())}
    starts, mw = starts[exists], np.asarray(mw, dtype=np.float64)[exists]
    label = name or f"caiso:{column}"
    if sheet == "Curtailments":
        t, values, end_s = _curtailment_grid(starts, mw, dates, start, where)
    else:
        t, values, end_s = _production_series(starts, mw, start, where, max_gap_s)
    try:
        trace = Trace(t, values, unit="MW", name=label, end_s=end_s, meta=meta)
    except TraceError as e:
        raise TraceError(where, e.message) from e
    window = fit_window(trace, duration_s=duration_s, step_s=step_s, where=where, start=start)
    if scale_to_kw is None:
        return window.scaled(1000.0, unit="kW")
    peak = float(window.values.max())
    # v / peak * scale (not v * (scale / peak)) maps the peak to exactly scale_to_kw.
    kw = window.values / peak * scale_to_kw if peak > 0 else np.zeros(len(window))
    return Trace(window.times_s, kw, unit="kW", name=window.name, end_s=window.end_s,
                 meta={**window.meta, "scale_to_kw": scale_to_kw, "peak_mw": peak})


def _curtailment_grid(starts: pd.DatetimeIndex, mw: np.ndarray, dates: pd.DatetimeIndex,
                      start: datetime, where: str) -> tuple[np.ndarray, np.ndarray, float]:
    """Dense 5-minute grid over the whole local days listed; unlisted intervals are 0."""
    first = pd.Timestamp(dates.min()).tz_localize(CAISO_TZ)
    last = (pd.Timestamp(dates.max()) + pd.Timedelta(days=1)).tz_localize(CAISO_TZ)
    n = int(round((last - first).total_seconds() / INTERVAL_S))
    grid = np.zeros(n)
    k = np.rint(np.asarray((starts - first).total_seconds()) / INTERVAL_S).astype(np.int64)
    np.add.at(grid, k, mw)
    t0 = float(seconds_since(pd.DatetimeIndex([first]), start, where)[0])
    return t0 + INTERVAL_S * np.arange(n), grid, t0 + INTERVAL_S * n


def _production_series(starts: pd.DatetimeIndex, mw: np.ndarray, start: datetime, where: str,
                        max_gap_s: float) -> tuple[np.ndarray, np.ndarray, float]:
    keep = ~np.isnan(mw)
    if not keep.any():
        raise TraceError(where, "Production: the column has no values")
    t = seconds_since(starts[keep], start, where)
    values = mw[keep]
    order = np.argsort(t, kind="stable")
    t, values = t[order], values[order]
    steps = np.diff(t)
    if np.any(steps == 0):
        when = pd.Timestamp(starts[keep][order][int(np.flatnonzero(steps == 0)[0])]).tz_convert(CAISO_TZ)
        raise TraceError(where, f"Production: interval starting {when} is listed twice")
    if steps.size and steps.max() > max_gap_s:
        i = int(np.argmax(steps))
        raise TraceError(where, f"Production: gap of {steps[i]:g} s after t={t[i]:g} s "
                                f"(max_gap_s={max_gap_s:g})")
    return t, values, float(t[-1] + INTERVAL_S)


def build(src: Caiso, ctx: TraceContext) -> Trace:
    """The trace of a ``kind: caiso`` source (its registry entry: :class:`testbed.spec.trace_sources.Caiso`)."""
    sc = ctx.scenario
    return load_caiso(
        Path(src.file), start=sc.start, duration_s=sc.duration_s, step_s=ctx.step_s, column=src.column,
        scale_to_kw=src.scale_to_kw, name=ctx.name,
    )
