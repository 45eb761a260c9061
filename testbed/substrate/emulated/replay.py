"""Replay bandwidth traces on live links: ``tc change`` in place at every change point."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from testbed.substrate.emulated.clock import EmulationClock


@dataclass(frozen=True)
class RateChange:
    t_s: float
    src: str
    dst: str
    rate_mbit: float


def change_points(traces: dict, rate_mbit, duration_s: float) -> list[RateChange]:
    """Every point in [0, duration) where a directed link's wall-clock rate changes, in time order.
    ``rate_mbit(gbps) -> float`` applies the run's scaling. The t = 0 rates are set at build time."""
    out = []
    for (src, dst), trace in traces.items():
        prev = rate_mbit(trace.at(0.0))
        for t, v in zip(trace.times_s, trace.values):
            if t <= 0 or t >= duration_s:
                continue
            r = rate_mbit(float(v))
            if r != prev:
                out.append(RateChange(float(t), src, dst, r))
                prev = r
    out.sort(key=lambda c: (c.t_s, c.src, c.dst))
    return out


class LinkReplayer(threading.Thread):
    """Applies rate changes when the clock reaches them; records how late each took effect."""

    def __init__(self, changes: list[RateChange], clock: EmulationClock, apply, on_exit=None):
        super().__init__(name="tb-link-replay", daemon=True)
        self._changes = changes
        self._clock = clock
        self._apply = apply  # (src, dst, rate_mbit) -> seconds the netlink call took
        self._on_exit = on_exit  # called in this thread when it ends (release per-thread resources)
        self._halt = threading.Event()
        self.applied: list[dict] = []
        self.error: BaseException | None = None

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=5)

    def run(self) -> None:
        i, n = 0, len(self._changes)
        try:
            while i < n and not self._halt.is_set():
                if not self._clock.wait_until(self._changes[i].t_s, self._halt):
                    return
                now = self._clock.now_s()
                latest: dict[tuple[str, str], RateChange] = {}
                while i < n and self._changes[i].t_s <= now:  # after a jump, only the latest rate per link
                    c = self._changes[i]
                    latest[(c.src, c.dst)] = c
                    i += 1
                for c in latest.values():
                    t_wall = time.monotonic()
                    call_s = self._apply(c.src, c.dst, c.rate_mbit)
                    lag_wall_s = (self._clock.now_s() - c.t_s) / self._clock.time_scale
                    self.applied.append({"t_s": c.t_s, "src": c.src, "dst": c.dst, "rate_mbit": c.rate_mbit,
                                         "call_ms": call_s * 1000, "lag_wall_ms": lag_wall_s * 1000,
                                         "wall": t_wall, "after_jump": self._clock.skipped_over(c.t_s)})
        except BaseException as e:  # surfaced by the substrate's poll
            self.error = e
        finally:
            if self._on_exit is not None:
                self._on_exit()
