"""Error messages about data files that never quote the file.

A trace path may point at any file the user can read (``/etc/shadow``); pandas' and
openpyxl's own messages quote the offending text (``Unable to parse string "..."``), so the
loaders report through these helpers instead: what is wrong and where (line, data row,
column name asked for), never the text found there.
"""

from __future__ import annotations

import re
import zipfile

import numpy as np
import pandas as pd

from testbed.errors import TraceError

__all__ = ["check_header_line", "missing_column", "numeric_column", "read_failure"]

MAX_HEADER_BYTES = 65536
"""A CSV header longer than this is no trace file (a million-column line would make pandas build a
million-column frame before any check could run)."""

_FIELDS = re.compile(r"Expected (\d+) fields in line (\d+), saw (\d+)")
_EOF_STRING = re.compile(r"EOF inside string starting at row (\d+)")


def read_failure(e: BaseException) -> str:
    """Why a file could not be parsed, in words that quote nothing from it."""
    if isinstance(e, UnicodeDecodeError):
        return f"not UTF-8 text (byte {e.start + 1})"
    if isinstance(e, pd.errors.EmptyDataError):
        return "no data (the file is empty)"
    if isinstance(e, pd.errors.ParserError):
        text = str(e)
        m = _FIELDS.search(text)
        if m:
            return f"line {m.group(2)} has {m.group(3)} fields, the header {m.group(1)}"
        m = _EOF_STRING.search(text)
        if m:
            return f"a quoted field starting at row {m.group(1)} never ends"
        return "malformed CSV"
    if isinstance(e, zipfile.BadZipFile):
        return "not a zip archive"
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    return f"unreadable ({type(e).__name__})"


def check_header_line(path, where: str) -> None:
    """TraceError unless the file's first line ends within MAX_HEADER_BYTES (plain CSV only)."""
    if str(path).lower().endswith((".gz", ".bz2", ".xz", ".zip", ".zst")):
        return
    try:
        with open(path, "rb") as f:
            head = f.read(MAX_HEADER_BYTES + 1)
    except OSError as e:
        raise TraceError(where, f"cannot read: {read_failure(e)}") from None
    if len(head) > MAX_HEADER_BYTES and b"\n" not in head:
        raise TraceError(where, f"the first line is longer than {MAX_HEADER_BYTES // 1024} kB: not a CSV trace")


def missing_column(column: str, have: int) -> str:
    return (f"missing column {column!r} (the header row has {have} column{'s' if have != 1 else ''}, "
            f"none named {column!r})")


def numeric_column(col: pd.Series, label: str, where: str, first_row: int = 1) -> np.ndarray:
    """The column as float64; blank cells become NaN; text that is not a number is a TraceError
    naming the data row (``first_row`` = number of the first row)."""
    values = pd.to_numeric(col, errors="coerce")
    bad = np.flatnonzero(values.isna().to_numpy() & col.notna().to_numpy())
    if bad.size:
        raise TraceError(where, f"column {label!r} must be numeric: data row {int(bad[0]) + first_row} is not a number")
    return values.to_numpy(dtype=np.float64)
