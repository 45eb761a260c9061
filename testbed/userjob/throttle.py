"""A user program's power cap, enforced: its whole process tree in a cgroup of the run, whose CPU
quota the agent steers in closed loop (:class:`testbed.power.throttle.quota_control.QuotaController`) so
the program runs at ``frac`` of its current unthrottled rate, measured from its own progress lines.

The program paces itself, so only a kernel limit can slow it: the throttle must be a cgroup kind
(``cgroup-v1`` or ``cgroup-v2``, whole processes). Where none can be made (not root, no writable
cgroup hierarchy or none that can delegate ``cpu``) :func:`open_program_throttle` says why and the cap is
recorded only (``throttle: none``). A thread polls the progress file every ``POLL_S``, feeds the
controller and writes the quota it asks for; processes the program started before its cgroup
existed are moved in at attach and by a sweep every ``SWEEP_S`` (children made later inherit it).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import psutil

from testbed.power.throttle.quota_control import QuotaController
from testbed.power.throttle.throttle import (
    KIND_DUTY, MAX_PERIOD_US, MIN_QUOTA_US, Throttle, ThrottleError, ThrottleUnavailable, make_throttle,
)
from testbed.userjob.progress_tail import ProgressTail

POLL_S = 0.05
SWEEP_S = 1.0
CPU_EVERY_S = 0.25
REQUOTA_REL = 0.05          # re-write the quota when it moved by more than this
MIN_PERIOD_S = 0.1
STEPS_PER_PERIOD = 2.0      # the quota period spans about two steps at the target (0.1 s .. 1 s)


class NoProgramThrottle(Exception):
    """No cgroup can hold the program here (the message says why)."""


def quota_period_us(target_steps_per_s: float | None) -> int:
    if not target_steps_per_s:
        return round(MIN_PERIOD_S * 1e6)
    period_s = min(MAX_PERIOD_US / 1e6, max(MIN_PERIOD_S, STEPS_PER_PERIOD / target_steps_per_s))
    return round(period_s * 1e6)


def open_program_throttle(run_id: str, tag: str) -> Throttle:
    """A cgroup throttle for whole processes, open; :class:`NoProgramThrottle` where none can be
    made (the duty-cycle fallback slows only a loop that calls it, not another program)."""
    if not run_id:
        raise NoProgramThrottle("the agent has no run id to label a cgroup with")
    try:
        th = make_throttle(run_id, tag, threads=False)
    except (ThrottleUnavailable, ValueError) as e:  # ValueError: a tag no cgroup can be named by
        raise NoProgramThrottle(str(e)) from None
    if th.kind == KIND_DUTY:
        where = " (the agent runs in a container)" \
            if Path("/.dockerenv").exists() else ""
        raise NoProgramThrottle(f"no cgroup can hold the program's processes here{where}: {th.reason}")
    return th


class ProgramThrottle:
    """Owns ``throttle`` (closed by :meth:`close`) and steers it from ``progress``."""

    def __init__(self, throttle: Throttle, progress: ProgressTail, *, clock=time.monotonic,
                 cores_max: float | None = None):
        self.throttle = throttle
        self.progress = progress
        self._clock = clock
        self.cores_max = float(cores_max or len(os.sched_getaffinity(0)) or 1)
        self.control = QuotaController(clock(), cores_max=self.cores_max)
        self._lock = threading.RLock()
        self._pid: int | None = None
        self._running = False          # the program is running (not stopped for a checkpoint)
        self._written: float | None = None
        self._stop = threading.Event()
        self._next_sweep = self._next_cpu = 0.0
        self.error: str | None = None
        self._thread = threading.Thread(target=self._loop, name="program-throttle", daemon=True)
        self._thread.start()

    # -- the program ---------------------------------------------------------------------------
    def attach(self, pid: int) -> None:
        """The program (re)started as ``pid``: it and its descendants go into the cgroup."""
        with self._lock:
            self._pid = pid
            self._sweep()
            self.progress.skip_to_end()
            self.control.release(self._clock())
            self._running = True
            self._write_quota(force=True)

    def detach(self) -> None:
        """The program stopped (a checkpoint, or killed): nothing is measured until :meth:`attach`."""
        with self._lock:
            self._running = False
            self._pid = None
            self.control.hold(self._clock())
            if self._written is not None:  # its checkpoint is not slowed by the cap
                self.throttle.set_cores(None)
                self._written = None

    def _tree(self) -> list[psutil.Process]:
        if self._pid is None:
            return []
        try:
            p = psutil.Process(self._pid)
            return [p, *p.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def _sweep(self) -> None:
        for p in self._tree():
            try:
                self.throttle.add_pid(p.pid)
            except ThrottleError:
                if p.is_running():
                    raise

    def _cpu_s(self) -> float | None:
        total = 0.0
        tree = self._tree()
        if not tree:
            return None
        for p in tree:
            try:
                t = p.cpu_times()
                total += t.user + t.system
            except psutil.NoSuchProcess:
                pass
        return total

    # -- the loop --------------------------------------------------------------------------------
    def set_frac(self, frac: float) -> dict:
        with self._lock:
            window = self.window()  # what the setting in force achieved, up to now
            self.control.set_frac(frac, self._clock())
            self._write_quota(force=True)
            return window

    def _loop(self) -> None:
        try:
            while not self._stop.wait(POLL_S):
                with self._lock:
                    if not self._running:
                        continue
                    now = self._clock()
                    self.progress.poll()
                    cpu = None
                    if now >= self._next_cpu and self.control.mode == "free":
                        cpu, self._next_cpu = self._cpu_s(), now + CPU_EVERY_S
                    if self.progress.step is not None:
                        self.control.observe(now, self.progress.step, cpu_s=cpu)
                    if now >= self._next_sweep:
                        self._sweep()
                        self._next_sweep = now + SWEEP_S
                    self._write_quota()
        except Exception as e:  # reported through the window, never silently lost
            self.error = f"{type(e).__name__}: {e}"

    def _write_quota(self, force: bool = False) -> None:
        cores = self.control.quota_cores()
        q = self._written
        if cores is None:
            if q is not None or force:
                self.throttle.set_cores(None)
                self._written = None
            return
        if force or q is None or abs(cores - q) > REQUOTA_REL * q:
            period_us = quota_period_us(self.control.target_steps_per_s)
            self.throttle.set_cores(max(cores, MIN_QUOTA_US / period_us), period_us=period_us)
            self._written = cores

    def window(self) -> dict:
        """What the program achieved since its current frac was set (measured from its progress)."""
        with self._lock:
            w = self.control.window()
            c = self.control.describe()
        return {**w.as_dict(), "reference_steps_per_s": c["reference_steps_per_s"], "probes": c["probes"],
                "target_steps_per_s": c["target_steps_per_s"], "quota_cores": self.throttle.cores,
                "training": self._running and self.error is None, "control_error": self.error}

    def close(self) -> None:
        """Stop steering, lift the quota, move the processes out and remove the cgroup."""
        self._stop.set()
        self._thread.join(timeout=5)
        with self._lock:
            self._running = False
            try:
                self.throttle.set_cores(None)
            except ThrottleError:
                pass
            self.throttle.close()
