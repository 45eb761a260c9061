"""Progress where no terminal shows a bar: one line every ``interval_s`` with done/total and an ETA.

``tqdm`` draws a bar on a terminal; in a log file, a CI job or a notebook's captured stderr its
carriage returns are noise (and by default testbed disabled it there, so a long emulation said
nothing for minutes). :class:`LineProgress` has the subset of tqdm's interface the studies use.
"""

from __future__ import annotations

import sys
import time
from typing import Callable, TextIO

LINE_INTERVAL_S = 30.0


def fmt_duration(seconds: float) -> str:
    """``42 s``, ``3.5 min``, ``2.1 h``."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def eta_s(done: float, total: float, elapsed_s: float) -> float | None:
    """Seconds left at the pace so far (None before any progress)."""
    if done <= 0 or total <= 0 or elapsed_s <= 0:
        return None
    return max(0.0, elapsed_s * (total - done) / done)


class LineProgress:
    """A progress line every ``interval_s`` (and none before the first interval passes)."""

    def __init__(self, total: float, desc: str, *, file: TextIO | None = None, interval_s: float | None = None,
                 unit: str = "step", clock: Callable[[], float] = time.monotonic):
        self.total, self.desc, self.unit = total, desc, unit
        self.file = file if file is not None else sys.stderr
        self.interval_s = LINE_INTERVAL_S if interval_s is None else interval_s
        self._clock = clock
        self._t0 = self._last = clock()
        self.n = 0.0
        self.postfix = ""
        self.closed = False

    def set_postfix_str(self, text: str) -> None:
        self.postfix = text

    def update(self, n: float = 1) -> None:
        self.n += n
        now = self._clock()
        if now - self._last >= self.interval_s and not self.closed:
            self._last = now
            self.file.write(self.line(now) + "\n")
            self.file.flush()

    def line(self, now: float | None = None) -> str:
        elapsed = (now if now is not None else self._clock()) - self._t0
        pct = 100.0 * self.n / self.total if self.total else 0.0
        left = eta_s(self.n, self.total, elapsed)
        eta = f", ETA {fmt_duration(left)}" if left is not None else ""
        what = f" ({self.postfix})" if self.postfix else ""
        return (f"{self.desc}{what}: {self.n:.0f}/{self.total:.0f} {self.unit}s ({pct:.0f} %), "
                f"{fmt_duration(elapsed)} elapsed{eta}")

    def close(self) -> None:
        self.closed = True


def progress_bar(total: float, desc: str, *, enabled: bool, unit: str = "step"):
    """tqdm on a terminal; :class:`LineProgress` elsewhere; a disabled tqdm when progress is off."""
    from tqdm import tqdm

    if enabled and not sys.stderr.isatty():
        return LineProgress(total, desc, unit=unit)
    return tqdm(total=total, desc=desc, unit=unit, disable=not enabled, delay=2.0, file=sys.stderr, leave=False)
