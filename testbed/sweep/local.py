"""Run trials on this machine: at most N at a time, each in a fresh process of its own.

A fresh process per trial keeps trials apart (no state carried from one to the next; an
emulation trial's substrate gets its own run id, so namespaces and links never collide) and lets
the sweep survive a trial that crashes its process. Processes come from a forkserver that has
already imported testbed, so starting one costs milliseconds, not an import of pandas.

On an exception in the driver (Ctrl-C, SIGTERM turned into SystemExit by the CLI) every running
trial process is sent SIGTERM by its PID, which it turns into SystemExit so that its substrate
tears down, then SIGKILL if it is still alive after a grace period.
"""

from __future__ import annotations

import multiprocessing as mp
import signal
from collections import deque
from multiprocessing.connection import wait
from typing import Callable

from testbed.sweep.trial import TrialTask, run_trial

TERMINATE_GRACE_S = 30.0


def _context():
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["testbed.sweep.trial"])
    return ctx


def _child(job: TrialTask, conn) -> None:
    def _terminate(signum, frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _terminate)
    try:
        conn.send(run_trial(job))
    finally:
        conn.close()


def _crashed(job: TrialTask, exitcode: int | None) -> dict:
    return {"rel_dir": job.rel_dir, "status": "failed", "wall_s": None, "log": "", "traceback": None,
            "error": f"the trial's process ended without a result (exit code {exitcode})"}


def run_local(jobs: list[TrialTask], parallel: int, on_result: Callable[[TrialTask, dict], None]) -> None:
    """Run ``jobs`` with at most ``parallel`` at once; ``on_result(job, result)`` as each one ends."""
    ctx = _context()
    pending = deque(jobs)
    running: dict = {}  # read end of the result pipe -> (job, process)
    try:
        while pending or running:
            while pending and len(running) < parallel:
                job = pending.popleft()
                recv, send = ctx.Pipe(duplex=False)
                proc = ctx.Process(target=_child, args=(job, send), name=f"tb-sweep-{job.rel_dir}")
                proc.start()
                send.close()  # the child holds the only write end: EOF here when it dies
                running[recv] = (job, proc)
            for recv in wait(list(running)):
                job, proc = running.pop(recv)
                try:
                    result = recv.recv()
                except (EOFError, OSError):
                    result = None
                recv.close()
                proc.join()
                on_result(job, result if result is not None else _crashed(job, proc.exitcode))
    finally:
        _stop(running)


def _stop(running: dict) -> None:
    """End the trial processes still running (ours, by PID): SIGTERM, then SIGKILL after a grace."""
    procs = [proc for _, proc in running.values()]
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
    for proc in procs:
        proc.join(TERMINATE_GRACE_S)
        if proc.is_alive():
            proc.kill()
            proc.join()
    for recv in running:
        recv.close()
