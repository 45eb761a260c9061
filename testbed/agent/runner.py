"""A training job in its own thread, paced, pausable at step boundaries, and throttleable.

Throughput (``set_throughput``, the emulated GPU power cap): the job trains at ``frac`` of its
*current* unthrottled rate, held there in closed loop by :class:`~testbed.power.throttle.rate_control.
RateController` (see that module for the design):

1. **pacing, closed loop**: the loop asks the controller before every step how long to wait; the
   controller measures every step (wall time, CPU time, time stopped by the kernel's quota) and
   keeps the achieved rate on ``frac x reference``, catching up after slow steps. The reference is
   the agent's pace ``steps_per_s`` (a ceiling) or, when the host cannot reach it, the rate the job
   really reaches unthrottled, re-estimated during the run (step times, and probes: short
   unthrottled windows).
2. **a real CPU limit** (:mod:`testbed.power.throttle.throttle`): the job's thread is alone in a cgroup
   whose quota is the CPU the target needs (``target x cpu_s_per_step``) times a headroom the
   controller raises while the job is behind schedule and lets fall back to 1.25 while it keeps up.
   The period spans two target steps (0.1 s to 1 s). Without cgroups (not root, or cgroup v2, which
   cannot take a single thread), the throttle is ``duty-cycle`` and pacing alone slows the job;
   status says which.

``throughput_window()`` answers what was achieved since the current frac was set: step intervals,
seconds and the *enforced* fraction (intervals over the integral of the reference rate) —
measured, beside the requested one. Time paused (a migration) is not in it.

Why not the quota alone: at agent pace a job uses a few per cent of a core (cnn-digits at 5 steps/s:
~28 ms of CPU per second), where CFS bandwidth control is coarse (ticks of 4 ms, a 1 ms minimum
quota). Measured on a 2-core host with the quota at exactly ``frac * steps_per_s * cpu_s_per_step``
and frac 0.5, the rate came out at 0.32 to 0.55 of the reference, and a thread stopped while it
held the GIL stalled the agent's other threads for up to one period (100 ms to 0.8 s).
"""

from __future__ import annotations

import threading
import time

from testbed.power.throttle.rate_control import RateController
from testbed.power.throttle.throttle import KIND_DUTY, MAX_PERIOD_US, MIN_QUOTA_US, Throttle

STEPS_PER_PERIOD = 2
MIN_PERIOD_S = 0.1
REQUOTA_REL = 0.1  # re-write the quota when it moved by more than this
MAX_WAIT_S = 0.1   # the loop wakes at least this often (stop, pause, a new frac)


def cgroup_quota(target_steps_per_s: float, cores: float) -> tuple[float, int]:
    """(cores, period_us) of a CPU ceiling of ``cores`` for a loop running ``target_steps_per_s``:
    the period spans two steps (0.1 s to the kernel's 1 s); the quota is at least 1 ms."""
    period_s = min(MAX_PERIOD_US / 1e6, max(MIN_PERIOD_S, STEPS_PER_PERIOD / target_steps_per_s))
    period_us = round(period_s * 1e6)
    return max(cores, MIN_QUOTA_US / period_us), period_us


class JobRunner:
    def __init__(self, job, *, steps_per_s: float | None, max_steps: int | None,
                 clock=time.monotonic):
        """``steps_per_s``: the pace at frac 1 (a ceiling); None: unpaced, steps back to back."""
        self.job = job
        self.steps_per_s = steps_per_s
        self.max_steps = max_steps
        self.throughput_frac = 1.0
        self.cap_w: float | None = None
        self.throttle: Throttle | None = None
        self._clock = clock
        self.control = RateController(clock(), ceiling_steps_per_s=steps_per_s)
        self._quota_written: float | None = None  # the cores last written (None: unlimited)
        self._throttle_lock = threading.Lock()
        self._ctl_lock = threading.Lock()
        self._step_lock = threading.Lock()  # held for the duration of one optimizer step
        self._running = threading.Event()
        self._running.set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="tb-job", daemon=True)
        self.error: str | None = None

    @property
    def cpu_s_per_step(self) -> float | None:
        return self.control.cpu_s_per_step

    def start(self) -> None:
        self._thread.start()

    @property
    def native_id(self) -> int | None:
        """The training thread's Linux thread id (what a cgroup's ``tasks`` takes)."""
        return self._thread.native_id

    def _done(self) -> bool:
        return self.max_steps is not None and self.job.steps_done >= self.max_steps

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                if not self._running.wait(timeout=MAX_WAIT_S) or self._done():
                    if self._done():
                        self._stop.wait(0.1)
                    continue
                with self._ctl_lock:
                    wait_s = self.control.delay_s(self._clock())
                if wait_s > 0:
                    self._stop.wait(min(wait_s, MAX_WAIT_S))
                    continue
                with self._step_lock:
                    if self._running.is_set() and not self._done():
                        self._one_step()
        except Exception as e:  # reported through status(), never silently lost
            self.error = f"{type(e).__name__}: {e}"

    def _one_step(self) -> None:
        th = self.throttle
        stalled0 = th.stalled_s() if th is not None else None
        with self._ctl_lock:
            t0 = self._clock()
            self.control.step_started(t0)
        c0 = time.thread_time()
        self.job.step()
        cpu_s, t1 = time.thread_time() - c0, self._clock()
        stalled1 = th.stalled_s() if th is not None else None
        stalled = stalled1 - stalled0 if stalled0 is not None and stalled1 is not None else 0.0
        with self._ctl_lock:
            self.control.step_finished(t1, wall_s=t1 - t0, cpu_s=cpu_s, stalled_s=stalled)
        self._apply_quota()

    def _apply_quota(self, force: bool = False) -> dict:
        """Write the cgroup ceiling the controller asks for, when it moved by more than
        REQUOTA_REL (None: unlimited); what is in force."""
        with self._throttle_lock:
            th = self.throttle
            if th is None or th.kind == KIND_DUTY:
                return {}
            with self._ctl_lock:
                cores, target = self.control.quota_cores(), self.control.target_steps_per_s
            q = self._quota_written
            if cores is None or not target:
                if q is not None or force:
                    th.set_cores(None)
                    self._quota_written = None
                return {"quota_cores": None}
            if force or q is None or abs(cores - q) > REQUOTA_REL * q:
                cores, period_us = cgroup_quota(target, cores)
                th.set_cores(cores, period_us=period_us)
                self._quota_written = cores
            return {"quota_cores": th.cores, "period_us": th.period_us}

    def set_throughput(self, frac: float, throttle: Throttle | None = None,
                       cap_w: float | None = None) -> dict:
        """Train at ``frac`` (0, 1] of the reference pace; ``throttle`` (owned from now on) holds
        the training thread. Returns what was set."""
        if not 0 < frac <= 1:
            raise ValueError(f"frac must be in (0, 1], got {frac!r}")
        if throttle is not None and throttle is not self.throttle:
            if self.throttle is not None:
                raise ValueError("this job already has a throttle")
            self.throttle = throttle
        window = self.throughput_window()  # what the setting in force achieved, up to now
        self.throughput_frac, self.cap_w = float(frac), cap_w
        with self._ctl_lock:
            self.control.set_frac(self.throughput_frac, self._clock())
        written = self._apply_quota(force=throttle is not None)
        with self._ctl_lock:
            c = self.control.describe()
        return {"frac": self.throughput_frac, "cap_w": cap_w,
                "throttle": self.throttle.kind if self.throttle else None,
                "steps_per_s": self.steps_per_s,
                "reference_steps_per_s": c["reference_steps_per_s"],
                "target_steps_per_s": c["target_steps_per_s"],
                "cpu_s_per_step": c["cpu_s_per_step"], "window": window, **written}

    def throughput_window(self) -> dict:
        """What the job achieved since its current frac was set: step intervals, seconds, measured
        steps/s and the enforced fraction (measured), beside the requested one."""
        with self._ctl_lock:
            w = self.control.window()
            c = self.control.describe()
        return {**w.as_dict(), "reference_steps_per_s": c["reference_steps_per_s"], "probes": c["probes"],
                "training": self._running.is_set() and not self._done() and self.error is None}

    def pause(self) -> None:
        """Return once no step is in progress and none will start until :meth:`resume`."""
        self._running.clear()
        with self._step_lock:
            with self._ctl_lock:
                self.control.hold(self._clock())

    def resume(self) -> None:
        with self._ctl_lock:
            self.control.release(self._clock())
        self._running.set()

    def stop(self) -> None:
        """End the thread, then release its throttle (the cgroup is removed)."""
        self._stop.set()
        self._running.set()
        th = self.throttle
        try:
            if th is not None and th.kind != KIND_DUTY:
                with self._throttle_lock:
                    th.set_cores(None)  # a thread throttled hard must not be slow to see the stop
        finally:
            self._thread.join(timeout=10)
            if th is not None:
                with self._throttle_lock:
                    self.throttle = None
                th.close()  # moves the thread (if still alive) back to the parent cgroup

    def losses(self) -> list[float]:
        with self._step_lock:
            return list(self.job.loss_history)

    def status(self) -> dict:
        return {"steps": self.job.steps_done, "paused": not self._running.is_set(), "done": self._done(),
                "error": self.error, "throughput_frac": self.throughput_frac,
                "throttle": self.throttle.kind if self.throttle else None}
