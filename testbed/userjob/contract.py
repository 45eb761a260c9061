"""The contract between a node agent and a user's training program (docs/workloads.md).

The agent starts the program as a child process in the site's network namespace with these
environment variables, and nothing else is asked of it:

``TESTBED_CKPT_PATH``
    Where to write the checkpoint when told to (one file, any format; write a temporary file and
    ``os.replace`` it, so that a half-written checkpoint is never there).
``TESTBED_RESUME_FROM``
    Set when the job resumes (after a migration, or at its source after a failed one): the
    checkpoint file to load before training on. Absent on a fresh start.
``TESTBED_PROGRESS_PATH``
    Append one JSON object per line, ``{"step": <int>, ...}``, at least once after starting (or
    loading the checkpoint) and then as often as you like (each step is best). Any other numbers
    (``"loss"``) are kept; a final line may carry ``"digest"`` (a hash of the state, for checks).
``TESTBED_MAX_STEPS`` (optional)
    Stop after this many steps in total (exit 0: the job is done).
``TESTBED_STEPS_PER_S`` (optional)
    The pace the scenario asks for (a hint; a real GPU job ignores it).
``TESTBED_SEED``, ``TESTBED_JOB_ID``
    The job's seed (derived from the scenario's) and id.

Signals: ``SIGTERM`` = checkpoint and stop: finish the current step, write the checkpoint to
``TESTBED_CKPT_PATH``, exit 0. The agent waits for the exit (``checkpoint_timeout_s``), checks
that the file was written after the signal, makes it durable (fsync) and hashes it; the migration
then moves it (plus ballast to the scaled size) over the emulated WAN. Any other exit status, or
no new checkpoint, is a failed checkpoint. ``SIGKILL`` = the job is gone (freed).

:class:`JobContext` implements the contract for a Python callable (``callable: "module:func"``);
a plain script needs none of this module (examples/workloads/train_loop.py reads the variables
itself).
"""

from __future__ import annotations

import json
import os
import signal
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CKPT_PATH = "TESTBED_CKPT_PATH"
RESUME_FROM = "TESTBED_RESUME_FROM"
PROGRESS_PATH = "TESTBED_PROGRESS_PATH"
MAX_STEPS = "TESTBED_MAX_STEPS"
STEPS_PER_S = "TESTBED_STEPS_PER_S"
SEED = "TESTBED_SEED"
JOB_ID = "TESTBED_JOB_ID"
ALL = (CKPT_PATH, RESUME_FROM, PROGRESS_PATH, MAX_STEPS, STEPS_PER_S, SEED, JOB_ID)


def read_progress(path: Path) -> list[dict[str, Any]]:
    """The complete JSON lines of a progress file (a line still being written is left out; lines
    that are not a JSON object with an integer ``step`` are skipped)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []
    out = []
    for line in text.split("\n")[:-1]:  # the last piece has no newline yet (or is empty)
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and isinstance(rec.get("step"), int) and not isinstance(rec.get("step"), bool):
            out.append(rec)
    return out


@dataclass
class JobContext:
    """What a Python callable gets: the contract's paths and numbers, ``stop_requested`` (set by
    SIGTERM: checkpoint and return) and ``report`` (one progress line)."""

    ckpt_path: Path
    resume_from: Path | None
    progress_path: Path
    max_steps: int | None
    steps_per_s: float | None
    seed: int
    job_id: str

    def __post_init__(self) -> None:
        self._stop = threading.Event()

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None, *, install_handler: bool = True) -> "JobContext":
        env = dict(os.environ if env is None else env)
        missing = [k for k in (CKPT_PATH, PROGRESS_PATH) if not env.get(k)]
        if missing:
            raise RuntimeError(f"not started by a testbed agent: {', '.join(missing)} not set")
        ctx = cls(Path(env[CKPT_PATH]), Path(env[RESUME_FROM]) if env.get(RESUME_FROM) else None,
                  Path(env[PROGRESS_PATH]), int(env[MAX_STEPS]) if env.get(MAX_STEPS) else None,
                  float(env[STEPS_PER_S]) if env.get(STEPS_PER_S) else None, int(env.get(SEED, "0")),
                  env.get(JOB_ID, "job"))
        if install_handler:
            signal.signal(signal.SIGTERM, lambda *_: ctx._stop.set())
        return ctx

    @property
    def stop_requested(self) -> bool:
        return self._stop.is_set()

    def request_stop(self) -> None:
        self._stop.set()

    def report(self, step: int, **values: Any) -> None:
        """Append one progress line ``{"step": step, **values}``."""
        with open(self.progress_path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"step": int(step), **values}, sort_keys=True) + "\n")

    def write_checkpoint(self, data: bytes) -> None:
        """``data`` to ``ckpt_path``, atomically (a temporary file, then ``os.replace``)."""
        tmp = self.ckpt_path.with_name(self.ckpt_path.name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, self.ckpt_path)
