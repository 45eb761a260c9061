"""Reading a small data file (a calibration, a compute profile) whole, within a size limit.

:func:`read_bounded` is the one reader of such files: it refuses a missing path, anything but a
regular file and a file over the limit, and reports each failure through the caller's error type
as ``(where, message)``, ``where`` being the file. No message quotes the file's content.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable


def read_bounded(path: str | Path, max_bytes: int, what: str, error: Callable[[str, str], Exception]) -> bytes:
    """The bytes of ``path``, at most ``max_bytes`` of them. ``what`` names the kind of file in the
    size message ("a calibration file"); ``error(where, message)`` makes the exception raised."""
    path = Path(path)
    where = str(path)
    if not path.exists():
        raise error(where, "file not found")
    if not path.is_file():
        raise error(where, "is not a regular file")
    too_big = f"is over the {max_bytes >> 20} MB limit of {what}"
    try:
        if path.stat().st_size > max_bytes:
            raise error(where, too_big)
        with open(path, "rb") as f:
            raw = f.read(max_bytes + 1)  # a file that grew since stat() is still cut at the limit
    except OSError as e:
        raise error(where, f"cannot be read ({e.strerror or type(e).__name__})") from None
    if len(raw) > max_bytes:
        raise error(where, too_big)
    return raw
