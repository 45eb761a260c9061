"""The emulation clock: scenario time runs at ``time_scale`` x wall time while something real is
happening (a transfer on the emulated WAN), and may jump ahead when nothing is (``skip_idle``).

Jumping is exact for everything the testbed measures: bytes only move while the clock runs in
real time, and link rates are re-applied for the new time on every jump.
"""

from __future__ import annotations

import threading
import time


class EmulationClock:
    def __init__(self, time_scale: float, *, skip_idle: bool = True):
        if time_scale <= 0:
            raise ValueError("time_scale must be > 0")
        self.time_scale = time_scale
        self.skip_idle = skip_idle
        self._cond = threading.Condition()
        self._base_s = 0.0
        self._wall_base = time.monotonic()
        self.skipped_s = 0.0  # scenario seconds jumped over
        self._jumps: list[tuple[float, float]] = []  # (from_s, to_s) of every jump

    def start(self, t_s: float = 0.0) -> None:
        with self._cond:
            self._base_s, self._wall_base = t_s, time.monotonic()
            self._cond.notify_all()

    def now_s(self) -> float:
        with self._cond:
            return self._base_s + (time.monotonic() - self._wall_base) * self.time_scale

    def jump_to(self, t_s: float) -> None:
        """Move scenario time forward to ``t_s`` at once (never backwards)."""
        with self._cond:
            now = self._base_s + (time.monotonic() - self._wall_base) * self.time_scale
            if t_s > now:
                self.skipped_s += t_s - now
                self._jumps.append((now, t_s))
                self._base_s, self._wall_base = t_s, time.monotonic()
                self._cond.notify_all()

    def skipped_over(self, t_s: float) -> bool:
        """True if scenario time ``t_s`` was jumped over (nothing real happened at it)."""
        with self._cond:
            return any(a < t_s <= b for a, b in reversed(self._jumps))

    def wait_until(self, t_s: float, stop: threading.Event | None = None, poll_s: float = 0.05) -> bool:
        """Block until scenario time reaches ``t_s`` (wakes early on jumps). False if stopped."""
        with self._cond:
            while True:
                if stop is not None and stop.is_set():
                    return False
                remaining = t_s - (self._base_s + (time.monotonic() - self._wall_base) * self.time_scale)
                if remaining <= 0:
                    return True
                self._cond.wait(timeout=min(poll_s, remaining / self.time_scale))
