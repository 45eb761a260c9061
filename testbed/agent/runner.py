"""A training job in its own thread, paced, pausable at step boundaries."""

from __future__ import annotations

import threading
import time


class JobRunner:
    def __init__(self, job, *, steps_per_s: float, max_steps: int | None):
        self.job = job
        self.steps_per_s = steps_per_s
        self.max_steps = max_steps
        self._step_lock = threading.Lock()  # held for the duration of one optimizer step
        self._running = threading.Event()
        self._running.set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="tb-job", daemon=True)
        self.error: str | None = None

    def start(self) -> None:
        self._thread.start()

    def _done(self) -> bool:
        return self.max_steps is not None and self.job.steps_done >= self.max_steps

    def _loop(self) -> None:
        period = 1.0 / self.steps_per_s
        try:
            while not self._stop.is_set():
                if not self._running.wait(timeout=0.1) or self._done():
                    if self._done():
                        self._stop.wait(0.1)
                    continue
                t0 = time.monotonic()
                with self._step_lock:
                    if self._running.is_set() and not self._done():
                        self.job.step()
                self._stop.wait(max(0.0, period - (time.monotonic() - t0)))
        except Exception as e:  # reported through status(), never silently lost
            self.error = f"{type(e).__name__}: {e}"

    def pause(self) -> None:
        """Return once no step is in progress and none will start until :meth:`resume`."""
        self._running.clear()
        with self._step_lock:
            pass

    def resume(self) -> None:
        self._running.set()

    def stop(self) -> None:
        self._stop.set()
        self._running.set()
        self._thread.join(timeout=10)

    def losses(self) -> list[float]:
        with self._step_lock:
            return list(self.job.loss_history)

    def status(self) -> dict:
        return {"steps": self.job.steps_done, "paused": not self._running.is_set(), "done": self._done(),
                "error": self.error}
