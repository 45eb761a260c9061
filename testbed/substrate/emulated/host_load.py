"""Host contention during a measurement: how much CPU *other* work took while a migration ran.

An emulated migration is measured in wall time on a shared machine; other processes on it (a
build, another run, a noisy VM neighbour) slow the relay, the hashing and the disk, and so the
measured times. :class:`HostLoad` samples, between :meth:`start` and :meth:`stop`:

- the whole host's busy CPU (``psutil.cpu_times()``: everything but idle and iowait, in cores),
- the CPU of this run's own processes (this process and its descendants: node agents, relays),
- ``steal`` (a hypervisor gave our vCPUs to someone else), in cores.

``other_cores = host busy - ours`` (what the rest of the machine used) and a migration is
``contended`` when ``other_cores > OTHER_CORES_MAX`` (half a core on average) or
``steal_cores > STEAL_CORES_MAX`` (a tenth of a core). Processes that leave during the window
are not counted as ours (their CPU shows as other's: conservative, it flags rather than hides).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import psutil

OTHER_CORES_MAX = 0.5
STEAL_CORES_MAX = 0.1


@dataclass(frozen=True)
class LoadSample:
    """Average CPU use over ``wall_s`` seconds, in cores (1.0 = one core busy throughout)."""

    wall_s: float
    host_cores: float
    own_cores: float
    steal_cores: float
    n_cpus: int

    @property
    def other_cores(self) -> float:
        return max(0.0, self.host_cores - self.own_cores)

    @property
    def contended(self) -> bool:
        return self.other_cores > OTHER_CORES_MAX or self.steal_cores > STEAL_CORES_MAX


def _host_busy_s() -> tuple[float, float]:
    t = psutil.cpu_times()
    idle = t.idle + getattr(t, "iowait", 0.0)
    steal = getattr(t, "steal", 0.0)
    return sum(t) - idle - steal - getattr(t, "guest", 0.0) - getattr(t, "guest_nice", 0.0), steal


def _own_cpu_s() -> dict[int, tuple[float, float]]:
    """CPU seconds of this process and its descendants now, by PID (with their create times, so
    a reused PID is not mistaken for one of ours)."""
    now = {}
    try:
        me = psutil.Process(os.getpid())
        procs = [me] + me.children(recursive=True)
    except psutil.Error:
        return now
    for p in procs:
        try:
            with p.oneshot():
                c = p.cpu_times()
                now[p.pid] = (p.create_time(), c.user + c.system)
        except psutil.Error:
            continue
    return now


class HostLoad:
    """``h = HostLoad().start(); ...; sample = h.stop()``."""

    def __init__(self) -> None:
        self._t0 = 0.0
        self._busy0 = self._steal0 = 0.0
        self._own0: dict[int, tuple[float, float]] = {}

    def start(self) -> "HostLoad":
        self._own0 = _own_cpu_s()
        self._busy0, self._steal0 = _host_busy_s()
        self._t0 = time.monotonic()
        return self

    def stop(self) -> LoadSample:
        busy1, steal1 = _host_busy_s()
        wall = max(1e-9, time.monotonic() - self._t0)
        own1 = _own_cpu_s()
        own = 0.0
        for pid, (created, cpu) in own1.items():
            before = self._own0.get(pid)
            own += cpu - before[1] if before is not None and before[0] == created else cpu
        return LoadSample(wall, (busy1 - self._busy0) / wall, own / wall, max(0.0, steal1 - self._steal0) / wall,
                          psutil.cpu_count() or 1)
