"""A training job in its own thread, paced, pausable at step boundaries, and throttleable.

Throughput (``set_throughput``, the emulated GPU power cap): the job trains at ``frac`` of its
reference pace ``steps_per_s``. Two mechanisms together:

1. **pacing**: the loop starts a step every ``1 / (frac * steps_per_s)`` seconds. This sets the rate,
   to within the accuracy of a sleep.
2. **a real CPU limit** (:mod:`testbed.power.throttle`): the job's thread is alone in a cgroup
   whose quota is the CPU the capped pace needs plus 25 % headroom,
   ``1.25 * frac * steps_per_s * cpu_s_per_step`` cores, where ``cpu_s_per_step`` is an EWMA of
   ``time.thread_time()`` per step (measured continuously, so the quota follows the job). The
   period spans two capped steps (0.1 s to 1 s) so that paced steps do not hit the quota; a job
   whose steps get costlier than measured is stopped by the kernel instead of overrunning its
   budget. Without cgroups (not root, or cgroup v2, which cannot take a single thread), the
   throttle is ``duty-cycle`` and pacing alone slows the job; status says which.

Why not the quota alone: at agent pace a job uses a few per cent of a core (cnn-digits at 5 steps/s:
~28 ms of CPU per second), where CFS bandwidth control is coarse (ticks of 4 ms, a 1 ms minimum
quota). Measured on a 2-core host with the quota at exactly ``frac * steps_per_s * cpu_s_per_step``
and frac 0.5, the rate came out at 0.32 to 0.55 of the reference, and a thread stopped while it
held the GIL stalled the agent's other threads for up to one period (100 ms to 0.8 s).
"""

from __future__ import annotations

import threading
import time

from testbed.power.throttle import KIND_DUTY, MAX_PERIOD_US, MIN_QUOTA_US, Throttle

QUOTA_HEADROOM = 1.25
STEPS_PER_PERIOD = 2
MIN_PERIOD_S = 0.1
EWMA_ALPHA = 0.2
REQUOTA_REL = 0.1  # re-write the quota when the CPU per step moved by more than this


def cgroup_quota(frac: float, steps_per_s: float, cpu_s_per_step: float) -> tuple[float, int]:
    """(cores, period_us) of the CPU ceiling for a job paced at ``frac * steps_per_s``."""
    rate = frac * steps_per_s
    period_s = min(MAX_PERIOD_US / 1e6, max(MIN_PERIOD_S, STEPS_PER_PERIOD / rate))
    period_us = round(period_s * 1e6)
    cores = QUOTA_HEADROOM * rate * cpu_s_per_step
    return max(cores, MIN_QUOTA_US / period_us), period_us


class JobRunner:
    def __init__(self, job, *, steps_per_s: float, max_steps: int | None):
        self.job = job
        self.steps_per_s = steps_per_s
        self.max_steps = max_steps
        self.throughput_frac = 1.0
        self.cap_w: float | None = None
        self.throttle: Throttle | None = None
        self.cpu_s_per_step: float | None = None
        self._quota_for: float | None = None  # the cpu_s_per_step the quota was written for
        self._throttle_lock = threading.Lock()
        self._step_lock = threading.Lock()  # held for the duration of one optimizer step
        self._running = threading.Event()
        self._running.set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="tb-job", daemon=True)
        self.error: str | None = None

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
                if not self._running.wait(timeout=0.1) or self._done():
                    if self._done():
                        self._stop.wait(0.1)
                    continue
                t0 = time.monotonic()
                with self._step_lock:
                    if self._running.is_set() and not self._done():
                        c0 = time.thread_time()
                        self.job.step()
                        self._observe_cpu(time.thread_time() - c0)
                period = 1.0 / (self.steps_per_s * self.throughput_frac)
                self._stop.wait(max(0.0, period - (time.monotonic() - t0)))
        except Exception as e:  # reported through status(), never silently lost
            self.error = f"{type(e).__name__}: {e}"

    def _observe_cpu(self, cpu_s: float) -> None:
        c = self.cpu_s_per_step
        self.cpu_s_per_step = cpu_s if c is None else (1 - EWMA_ALPHA) * c + EWMA_ALPHA * cpu_s
        q = self._quota_for
        if self.throughput_frac < 1.0 and self.throttle is not None and self.throttle.kind != KIND_DUTY \
                and (q is None or abs(self.cpu_s_per_step - q) > REQUOTA_REL * q):
            self._apply_quota()

    def _apply_quota(self) -> dict:
        """Write the cgroup ceiling for the current frac (unlimited at 1.0); what was written."""
        with self._throttle_lock:
            th, c = self.throttle, self.cpu_s_per_step
            if th is None or th.kind == KIND_DUTY:
                return {}
            if self.throughput_frac >= 1.0:
                th.set_cores(None)
                self._quota_for = None
                return {"quota_cores": None}
            if c is None:  # no step measured yet: the loop writes it after the first one
                return {"quota_cores": None}
            cores, period_us = cgroup_quota(self.throughput_frac, self.steps_per_s, c)
            th.set_cores(cores, period_us=period_us)
            self._quota_for = c
            return {"quota_cores": cores, "period_us": period_us}

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
        self.throughput_frac, self.cap_w = float(frac), cap_w
        written = self._apply_quota()
        return {"frac": self.throughput_frac, "cap_w": cap_w,
                "throttle": self.throttle.kind if self.throttle else None,
                "steps_per_s": self.steps_per_s,
                "target_steps_per_s": self.steps_per_s * self.throughput_frac,
                "cpu_s_per_step": self.cpu_s_per_step, **written}

    def pause(self) -> None:
        """Return once no step is in progress and none will start until :meth:`resume`."""
        self._running.clear()
        with self._step_lock:
            pass

    def resume(self) -> None:
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
