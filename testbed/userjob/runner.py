"""A user's training program as a node agent's job: a child process under the contract of
:mod:`testbed.userjob.contract`, started, checkpointed (SIGTERM, wait, check, fsync, hash),
restarted from a checkpoint, and ended, by PID only."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from testbed.errors import TestbedError
from testbed.userjob import contract
from testbed.userjob.progress_tail import ProgressTail
from testbed.userjob.spec import Program
from testbed.userjob.throttle import NoProgramThrottle, ProgramThrottle, open_program_throttle

KILL_WAIT_S = 10.0
POLL_S = 0.02


class UserJobError(TestbedError):
    """The program broke the contract (exited with an error, wrote no checkpoint, never reported)."""


@dataclass(frozen=True)
class Checkpointed:
    path: Path
    size_bytes: int
    sha256: str
    step: int
    t_stop_s: float   # SIGTERM to the program's exit (its last step + writing the checkpoint)
    t_sync_s: float   # fsync + SHA-256 of the file by the agent


def file_sha256(path: Path, chunk: int = 4 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


class UserJobRunner:
    """One job of a user's program at one agent. ``ckpt_path``: where the program writes its
    checkpoint (and, on a resume, where it is read from); ``job_dir`` holds the progress file and
    the program's log. ``run_id`` and ``throttle_tag`` name the cgroup a power cap puts the
    program in (``tb-<run>-<tag>``); without a run id a cap is recorded only."""

    def __init__(self, program: Program, *, job_id: str, job_dir: Path, ckpt_path: Path, seed: int | None,
                 steps_per_s: float | None, max_steps: int | None, run_id: str = "",
                 throttle_tag: str | None = None):
        self.program = program
        self.job_id = job_id
        self.job_dir = job_dir
        self.ckpt_path = ckpt_path
        self.seed = seed
        self.steps_per_s = steps_per_s
        self.max_steps = max_steps
        self.progress_path = job_dir / "progress.jsonl"
        self.log_path = job_dir / "program.log"
        self.proc: subprocess.Popen | None = None
        self.throughput_frac = 1.0
        self.run_id = run_id
        self.throttle_tag = throttle_tag or job_id
        self.throttle: ProgramThrottle | None = None  # made by the first cap (a cgroup)
        self.throttle_reason = ""  # why a cap is not enforced (no cgroup can be made here)
        self._stopped = False  # stopped by a checkpoint (paused until resumed elsewhere or here)
        self._n_seen = 0
        self.started_at_step = 0  # the step its first progress line after the last (re)start named
        job_dir.mkdir(parents=True, exist_ok=True)

    # -- the process ---------------------------------------------------------------------------
    def _env(self, resume_from: Path | None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in contract.ALL}
        env.update(self.program.env)
        env.update({contract.CKPT_PATH: str(self.ckpt_path), contract.PROGRESS_PATH: str(self.progress_path),
                    contract.JOB_ID: self.job_id})
        if self.seed is not None:
            env[contract.SEED] = str(self.seed)
        if resume_from is not None:
            env[contract.RESUME_FROM] = str(resume_from)
        if self.max_steps is not None:
            env[contract.MAX_STEPS] = str(self.max_steps)
        if self.steps_per_s is not None:
            env[contract.STEPS_PER_S] = repr(float(self.steps_per_s))
        return env

    def start(self, resume_from: Path | None = None) -> float:
        """Start the program (from ``resume_from``); return once it wrote a progress line: the
        seconds that took (its start, and its load of the checkpoint)."""
        if self.proc is not None and self.proc.poll() is None:
            raise UserJobError(f"job {self.job_id}: the program is already running")
        self._n_seen = len(contract.read_progress(self.progress_path))
        t0 = time.perf_counter()
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.program.argv(), cwd=self.program.cwd, env=self._env(resume_from),
                                         stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        self._stopped = False
        if self.throttle is not None:
            self.throttle.attach(self.proc.pid)
        deadline = t0 + self.program.start_timeout_s
        while len(contract.read_progress(self.progress_path)) <= self._n_seen:
            rc = self.proc.poll()
            if rc is not None:
                raise UserJobError(f"job {self.job_id}: the program exited with {rc} before its first progress "
                                   f"line{self._log_tail()}")
            if time.perf_counter() > deadline:
                self.kill()
                raise UserJobError(f"job {self.job_id}: no progress line {self.program.start_timeout_s:g} s after "
                                   f"its start (the contract: append {{\"step\": N}} to $TESTBED_PROGRESS_PATH)")
            time.sleep(POLL_S)
        self.started_at_step = int(contract.read_progress(self.progress_path)[self._n_seen]["step"])
        return time.perf_counter() - t0

    def _log_tail(self, n: int = 300) -> str:
        try:
            text = self.log_path.read_bytes()[-n:].decode("utf-8", errors="replace").strip()
        except OSError:
            return ""
        last = text.splitlines()[-1] if text else ""
        return f" (its log: {last})" if last else ""

    def checkpoint_and_stop(self) -> Checkpointed:
        """SIGTERM, wait for the exit, check that a new checkpoint is there, fsync and hash it."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            raise UserJobError(f"job {self.job_id}: the program is not running (it cannot checkpoint)")
        if self.throttle is not None:  # the checkpoint is not slowed by the cap
            self.throttle.detach()
        t_sig = time.time_ns()
        t0 = time.perf_counter()
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=self.program.checkpoint_timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            raise UserJobError(f"job {self.job_id}: no exit {self.program.checkpoint_timeout_s:g} s after SIGTERM "
                               "(checkpoint_timeout_s)") from None
        t1 = time.perf_counter()
        self._stopped = True
        if rc != 0:
            raise UserJobError(f"job {self.job_id}: the program exited with {rc} on SIGTERM{self._log_tail()}")
        try:
            st = self.ckpt_path.stat()
        except FileNotFoundError:
            raise UserJobError(f"job {self.job_id}: no checkpoint at $TESTBED_CKPT_PATH after SIGTERM") from None
        if st.st_mtime_ns < t_sig - 10_000_000:  # 10 ms: file systems with coarse timestamps
            raise UserJobError(f"job {self.job_id}: the checkpoint at $TESTBED_CKPT_PATH is older than the SIGTERM")
        fd = os.open(self.ckpt_path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        digest = file_sha256(self.ckpt_path)
        return Checkpointed(self.ckpt_path, st.st_size, digest, self.steps(), t1 - t0, time.perf_counter() - t1)

    def resume(self) -> float:
        """Start again from the checkpoint this agent holds (a migration that failed)."""
        if not self.ckpt_path.is_file():
            raise UserJobError(f"job {self.job_id}: no checkpoint to resume from")
        return self.start(resume_from=self.ckpt_path)

    def kill(self) -> None:
        """End the program (by its PID: SIGTERM's checkpoint is not wanted here, so SIGKILL)."""
        proc = self.proc
        if self.throttle is not None:
            self.throttle.detach()
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=KILL_WAIT_S)

    # -- what the agent reports ----------------------------------------------------------------
    def progress(self) -> list[dict]:
        return contract.read_progress(self.progress_path)

    def steps(self) -> int:
        p = self.progress()
        return int(p[-1]["step"]) if p else 0

    def losses(self) -> list[float]:
        return [float(r["loss"]) for r in self.progress() if isinstance(r.get("loss"), (int, float))]

    def _exit(self) -> int | None:
        return self.proc.poll() if self.proc is not None else None

    def status(self) -> dict:
        rc = self._exit()
        done = rc == 0 and not self._stopped
        error = None if rc in (None, 0) or self._stopped else f"program exited with {rc}{self._log_tail()}"
        last = self.progress()[-1:] or [{}]
        return {"steps": self.steps(), "paused": self._stopped, "done": done, "error": error,
                "throughput_frac": self.throughput_frac,
                "throttle": self.throttle.throttle.kind if self.throttle is not None else None, "user_program": True,
                "digest": last[0].get("digest")}

    def set_throughput(self, frac: float, cap_w: float | None = None) -> dict:
        """Run the program at ``frac`` (0, 1] of its current unthrottled rate: the first call puts
        its process tree in a cgroup whose CPU quota is steered in closed loop from its
        progress lines (:mod:`testbed.userjob.throttle`). Where no cgroup can be made the cap is
        recorded only: ``throttle: none`` and the reason. ``window``: what the setting in force
        until now achieved, measured."""
        if not 0 < frac <= 1:
            raise ValueError(f"frac must be in (0, 1], got {frac!r}")
        if self.throttle is None and not self.throttle_reason:
            try:
                th = open_program_throttle(self.run_id, self.throttle_tag)
            except NoProgramThrottle as e:
                self.throttle_reason = f"a user program is slowed only by a cgroup's CPU quota: {e}"
            else:
                self.throttle = ProgramThrottle(th, ProgressTail(self.progress_path))
                if self.proc is not None and self.proc.poll() is None and not self._stopped:
                    self.throttle.attach(self.proc.pid)
        self.throughput_frac = float(frac)
        if self.throttle is None:
            return {"frac": self.throughput_frac, "cap_w": cap_w, "throttle": "none",
                    "throttle_reason": self.throttle_reason, "window": None}
        window = self.throttle.set_frac(self.throughput_frac)
        window["training"] = bool(window["training"]) and self.proc is not None and self.proc.poll() is None
        c = self.throttle.control.describe()
        return {"frac": self.throughput_frac, "cap_w": cap_w, "throttle": self.throttle.throttle.kind,
                "throttle_reason": self.throttle.throttle.reason,
                "reference_steps_per_s": c["reference_steps_per_s"], "target_steps_per_s": c["target_steps_per_s"],
                "quota_cores": self.throttle.throttle.cores, "period_us": self.throttle.throttle.period_us,
                "window": window}

    def stop(self) -> None:
        """End the program, then remove its cgroup (if a cap made one)."""
        try:
            self.kill()
        finally:
            th, self.throttle = self.throttle, None
            if th is not None:
                th.close()
