"""CPU throttles that make real training run slower, as a GPU power cap would.

An emulated GPU cap must slow the job down for real, not only in the records. Three kinds, and
``kind`` says which one ran so a manifest records it honestly:

``cgroup-v1``   a cgroup ``tb-<run>-<tag>`` in the v1 ``cpu`` hierarchy; ``set_cores(x)`` writes
                ``cpu.cfs_quota_us = x * cpu.cfs_period_us``: the kernel stops the tasks in it
                once they used ``x`` CPU-seconds per second. Takes whole processes
                (``cgroup.procs``) or single threads (``tasks`` accepts thread ids).
``cgroup-v2``   the same through ``cpu.max`` on a cgroup2 mount whose ``cpu`` controller can be
                enabled for our children. Whole processes only (thread-granular v2 needs
                "threaded" cgroups, which this module does not set up): ``add_tid`` refuses.
``duty-cycle``  no kernel help (not root, or no usable cgroup): the throttled loop calls
                :meth:`Throttle.after_step` after every step, owes ``busy * (1/x - 1)`` of
                sleep and sleeps it off in chunks of about a period, so a single-threaded loop
                runs ``x`` of the time. It only works from inside the loop it slows.

Every cgroup is owned by its throttle (a context manager): ``close`` moves the tasks still in it
back to the parent cgroup, then removes it, on every exit path. A crash leaves at most
``tb-<run>-*`` directories, which ``testbed clean`` removes (:mod:`testbed.power.throttle.cgroups`).

Limits (kernel): a quota is at least 1 ms per period and a period at most 1 s, so a throttle can
not go below 0.001 cores; bandwidth is enforced at scheduler ticks (4 ms at HZ=250), so a quota
of a few milliseconds per period is only approximate. A throttled *thread* of a Python process
that is stopped while it holds the GIL stalls the process's other threads until the next period.
"""

from __future__ import annotations

import os
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path

from testbed.power.throttle.cgroups import (
    ThrottleError, ThrottleUnavailable, cgroup_mounts, cgroup_name, find_run_cgroups, own_cgroup,
    read_ids, release_cgroup, remove_run_cgroups, run_of_cgroup,
)

KIND_V1, KIND_V2, KIND_DUTY = "cgroup-v1", "cgroup-v2", "duty-cycle"
KINDS = (KIND_V1, KIND_V2, KIND_DUTY)
DEFAULT_PERIOD_US = 100_000
MIN_PERIOD_US, MAX_PERIOD_US = 1_000, 1_000_000
MIN_QUOTA_US = 1_000

__all__ = [  # the cgroup helpers are re-exported: callers need only this module
    "CgroupV1Throttle", "CgroupV2Throttle", "DutyCycleThrottle", "Throttle", "ThrottleError",
    "ThrottleUnavailable", "cgroup_mounts", "cgroup_name", "find_run_cgroups", "make_throttle",
    "own_cgroup", "release_cgroup", "remove_run_cgroups", "run_of_cgroup",
]


def _cores_to_quota(cores: float | None, period_us: int) -> int | None:
    """Quota in microseconds per period (None: unlimited), floored at the kernel minimum."""
    if cores is None:
        return None
    if not cores > 0:  # also refuses NaN
        raise ThrottleError(f"cores must be > 0 (or None for unlimited), got {cores!r}")
    return max(MIN_QUOTA_US, round(cores * period_us))


class Throttle(ABC):
    """Limits how much CPU the tasks added to it get. A context manager; ``close`` is idempotent."""

    kind: str
    reason: str = ""  # why a better kind was not used (set by make_throttle)

    def __init__(self) -> None:
        self.cores: float | None = None  # None: unlimited
        self.period_us = DEFAULT_PERIOD_US

    def __enter__(self) -> Throttle:
        self.open()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close()

    def open(self) -> None:  # noqa: B027 (optional hook)
        """Create what the throttle needs; idempotent."""

    def close(self) -> None:  # noqa: B027 (optional hook)
        """Release every task and remove what :meth:`open` made; idempotent."""

    @abstractmethod
    def add_pid(self, pid: int) -> None:
        """Throttle a whole process (every thread)."""

    @abstractmethod
    def add_tid(self, tid: int) -> None:
        """Throttle one thread (a Linux thread id, ``threading.get_native_id()``)."""

    @abstractmethod
    def set_cores(self, cores: float | None, *, period_us: int | None = None) -> None:
        """Allow ``cores`` CPU-seconds per second (None: unlimited), enforced per ``period_us``."""

    def after_step(self, busy_s: float) -> float:
        """Called by the throttled loop after each step; seconds it slept (kernel kinds: 0)."""
        return 0.0

    def stalled_s(self) -> float | None:
        """Seconds the kernel has held the tasks for their quota so far (cgroup ``cpu.stat``);
        None where that is not known. Differences of two readings are what count."""
        return 0.0

    def prioritise(self) -> None:  # noqa: B027 (only the kernel kinds can)
        """Let the throttled tasks win over other work on the host up to their quota (maximum
        cgroup weight), so that a busy neighbour does not pose as the throttle. Benchmarks only."""

    def describe(self) -> dict:
        return {"kind": self.kind, "cores": self.cores, "period_us": self.period_us,
                "reason": self.reason}


class _CgroupThrottle(Throttle):
    """One cgroup under ``parent``; the v1/v2 subclasses name the control files."""

    procs_file = "cgroup.procs"
    threads_file: str | None = None

    def __init__(self, run_id: str, tag: str, *, parent: Path, period_us: int = DEFAULT_PERIOD_US):
        super().__init__()
        self.parent = Path(parent)
        self.path = self.parent / cgroup_name(run_id, tag)
        self.period_us = _check_period(period_us)
        self._open = False

    def open(self) -> None:
        if self._open:
            return
        self._prepare_parent()
        try:
            self.path.mkdir()
        except FileExistsError:
            raise ThrottleError(f"{self.path} already exists (a leftover of this run? "
                                "`testbed clean --run RUN` removes it)") from None
        except OSError as e:
            raise ThrottleUnavailable(f"{self.kind}: cannot create {self.path}: {e.strerror}") from e
        self._open = True
        try:
            self._write_limit(None, self.period_us)
        except BaseException:
            self.close()
            raise

    def _prepare_parent(self) -> None:  # noqa: B027 (v2 enables the controller)
        pass

    def _write(self, name: str, value: str) -> None:
        try:
            (self.path / name).write_text(value)
        except OSError as e:
            raise ThrottleError(f"{self.kind}: writing {value!r} to {self.path / name}: "
                                f"{e.strerror}") from e

    def _require_open(self) -> None:
        if not self._open:
            raise ThrottleError(f"{self.kind} throttle {self.path.name} is not open")

    def add_pid(self, pid: int) -> None:
        self._require_open()
        self._write(self.procs_file, str(int(pid)))

    def add_tid(self, tid: int) -> None:
        self._require_open()
        if self.threads_file is None:
            raise ThrottleUnavailable(f"{self.kind}: only whole processes can be moved "
                                      "(threaded cgroups are not set up); use a process per job")
        self._write(self.threads_file, str(int(tid)))

    def set_cores(self, cores: float | None, *, period_us: int | None = None) -> None:
        self._require_open()
        period_us = self.period_us if period_us is None else _check_period(period_us)
        self._write_limit(_cores_to_quota(cores, period_us), period_us)
        self.cores, self.period_us = cores, period_us

    @abstractmethod
    def _write_limit(self, quota_us: int | None, period_us: int) -> None: ...

    def tasks(self) -> list[int]:
        return read_ids(self.path / (self.threads_file or self.procs_file))

    _stat_key, _stat_unit_s = "throttled_time", 1e-9  # v1: nanoseconds

    def stalled_s(self) -> float | None:
        try:
            for line in (self.path / "cpu.stat").read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == self._stat_key:
                    return int(value) * self._stat_unit_s
        except (OSError, ValueError):
            return None
        return None

    def close(self) -> None:
        if not self._open:
            return
        self._open = False
        release_cgroup(self.path, self.threads_file or self.procs_file)

    def describe(self) -> dict:
        return {**super().describe(), "path": str(self.path)}


class CgroupV1Throttle(_CgroupThrottle):
    kind = KIND_V1
    threads_file = "tasks"

    def prioritise(self) -> None:
        self._require_open()
        self._write("cpu.shares", "262144")  # the kernel's maximum (default 1024)

    def _write_limit(self, quota_us: int | None, period_us: int) -> None:
        # The kernel checks each (quota, period) pair: lift the quota before changing the period.
        period_file = self.path / "cpu.cfs_period_us"
        if not period_file.exists() or int(period_file.read_text()) != period_us:
            self._write("cpu.cfs_quota_us", "-1")
            self._write("cpu.cfs_period_us", str(period_us))
        self._write("cpu.cfs_quota_us", str(-1 if quota_us is None else quota_us))


class CgroupV2Throttle(_CgroupThrottle):
    kind = KIND_V2
    _stat_key, _stat_unit_s = "throttled_usec", 1e-6

    def _prepare_parent(self) -> None:
        control = self.parent / "cgroup.subtree_control"
        try:
            if "cpu" not in control.read_text().split():
                control.write_text("+cpu")
        except OSError as e:
            raise ThrottleUnavailable(
                f"cgroup-v2: cannot enable the cpu controller in {control}: {e.strerror} (a cgroup "
                "that holds processes cannot delegate controllers)") from e

    def prioritise(self) -> None:
        self._require_open()
        self._write("cpu.weight", "10000")  # the kernel's maximum (default 100)

    def _write_limit(self, quota_us: int | None, period_us: int) -> None:
        self._write("cpu.max", f"{'max' if quota_us is None else quota_us} {period_us}")


class DutyCycleThrottle(Throttle):
    """User-space: the loop owes ``busy_s * (1/cores - 1)`` seconds of sleep per step, and sleeps
    the debt off once it reaches ``(1 - cores)`` of a period (so it runs about ``cores * period``,
    then sleeps ``(1 - cores) * period``, as CFS bandwidth control does). Sleeping after every
    short step instead slows the steps themselves (wake-ups, cold caches); measured: -38 % at 0.45
    on a 2-core VM. Oversleeping is paid back: the debt is reduced by the time actually slept."""

    kind = KIND_DUTY

    def __init__(self, *, sleep: Callable[[float], object] = time.sleep,
                 clock: Callable[[], float] = time.perf_counter):
        super().__init__()
        self._sleep, self._clock = sleep, clock
        self._debt_s = 0.0
        self.tids: set[int] = set()

    def add_pid(self, pid: int) -> None:
        if int(pid) != os.getpid():
            raise ThrottleUnavailable("duty-cycle: can only slow the loop that calls after_step, "
                                      f"in this process (pid {os.getpid()}), not pid {pid}")

    def add_tid(self, tid: int) -> None:
        if not Path(f"/proc/self/task/{int(tid)}").exists():
            raise ThrottleUnavailable(f"duty-cycle: thread {tid} is not in this process")
        self.tids.add(int(tid))

    def set_cores(self, cores: float | None, *, period_us: int | None = None) -> None:
        _cores_to_quota(cores, DEFAULT_PERIOD_US)  # same validation as the kernel kinds
        if cores != self.cores:
            self._debt_s = 0.0
        self.cores = cores
        if period_us is not None:
            self.period_us = _check_period(period_us)

    def sleep_for_s(self, busy_s: float) -> float:
        """Seconds of sleep one step of ``busy_s`` costs at the current setting."""
        if self.cores is None or self.cores >= 1.0 or busy_s <= 0:
            return 0.0
        return busy_s * (1.0 / self.cores - 1.0)

    def after_step(self, busy_s: float) -> float:
        self._debt_s += self.sleep_for_s(busy_s)
        if self.cores is None or self._debt_s < (1.0 - self.cores) * self.period_us / 1e6:
            return 0.0
        t0 = self._clock()
        self._sleep(self._debt_s)
        slept_s = self._clock() - t0
        self._debt_s -= slept_s
        return slept_s


def _check_period(period_us: int) -> int:
    if not MIN_PERIOD_US <= int(period_us) <= MAX_PERIOD_US:
        raise ThrottleError(f"period_us must be in [{MIN_PERIOD_US}, {MAX_PERIOD_US}], got {period_us}")
    return int(period_us)


def make_throttle(run_id: str, tag: str, *, threads: bool = False, prefer: str | None = None,
                  period_us: int = DEFAULT_PERIOD_US, mounts: dict[str, Path] | None = None,
                  sleep: Callable[[float], object] = time.sleep) -> Throttle:
    """The best throttle available here, already open: cgroup v1, else v2, else duty-cycle.

    ``threads``: single threads will be added (rules out cgroup v2). ``prefer``: exactly that kind
    or :class:`ThrottleUnavailable`. The returned throttle's ``reason`` says why better kinds
    were not used. Close it (or use it in a ``with``) to remove its cgroup.
    """
    if prefer is not None and prefer not in KINDS:
        raise ThrottleError(f"unknown throttle kind {prefer!r} (known: {', '.join(KINDS)})")
    m = cgroup_mounts() if mounts is None else mounts
    reasons: list[str] = []
    for kind in (KIND_V1, KIND_V2):
        if prefer not in (None, kind):
            continue
        try:
            throttle = _try_cgroup(kind, run_id, tag, threads=threads, period_us=period_us, mounts=m)
        except ThrottleUnavailable as e:
            if prefer == kind:
                raise
            reasons.append(str(e))
            continue
        throttle.reason = "; ".join(reasons)
        return throttle
    throttle = DutyCycleThrottle(sleep=sleep)
    throttle.reason = "; ".join(reasons)
    return throttle


def _try_cgroup(kind: str, run_id: str, tag: str, *, threads: bool, period_us: int,
                mounts: dict[str, Path]) -> Throttle:
    if os.geteuid() != 0:
        raise ThrottleUnavailable(f"{kind}: needs root")
    if kind == KIND_V1:
        if "v1_cpu" not in mounts:
            raise ThrottleUnavailable("cgroup-v1: no v1 hierarchy with the cpu controller is mounted")
        throttle: _CgroupThrottle = CgroupV1Throttle(
            run_id, tag, parent=own_cgroup(mounts["v1_cpu"], 1), period_us=period_us)
    else:
        if "v2" not in mounts:
            raise ThrottleUnavailable("cgroup-v2: no cgroup2 mount")
        if threads:
            raise ThrottleUnavailable("cgroup-v2: moves whole processes only, and single threads "
                                      "are to be throttled")
        if "cpu" not in (mounts["v2"] / "cgroup.controllers").read_text().split():
            raise ThrottleUnavailable(f"cgroup-v2: {mounts['v2']} has no cpu controller")
        throttle = CgroupV2Throttle(run_id, tag, parent=own_cgroup(mounts["v2"], 2),
                                    period_us=period_us)
    throttle.open()
    return throttle
