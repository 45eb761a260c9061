"""The node agent: runs real training jobs at one site and carries out its part of a migration.

Migration protocol (driven by the controller over the management network):
  source: ``checkpoint_and_pause`` -> ``send_checkpoint`` (checkpoint file + declared ballast,
  through the transfer service over the WAN) ; destination: ``load_and_resume`` (verifies the
  checkpoint's SHA-256, loads, resumes) ; source: ``free``. If anything fails before the
  destination resumed, the controller calls ``resume`` at the source: the job continues from the
  checkpoint it paused at, so no training progress is lost.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testbed.agent.protocol import RequestRefused
from testbed.agent.runner import JobRunner
from testbed.agent import userjob_ops as userjob


@dataclass(frozen=True)
class Received:
    """A received checkpoint file, made durable and read back (:meth:`Agent.received_checkpoint`)."""

    path: Path
    keep: int            # bytes of checkpoint at the front (the rest is ballast)
    durable: Any         # disk_io.Persisted: fsync time and size
    read: Any            # disk_io.ReadBack: bytes read from the device and the time
    data: bytes
    t0: float            # perf_counter when the load began
    top_up: Any          # disk_io.IoTiming: the load sample's top-up and per-file part (load_top_up)


class Agent:
    def __init__(self, site: str, workdir: Path, token: str, *, run_id: str = ""):
        self.site = site
        self.run_id = run_id  # names the jobs' throttle cgroups tb-<run>-<site>-<job>
        self.workdir = workdir
        self.token = token
        self.incoming = workdir / "incoming"
        self.ckpts = workdir / "checkpoints"
        self.incoming.mkdir(parents=True, exist_ok=True)
        self.ckpts.mkdir(parents=True, exist_ok=True)
        self.jobs: dict[str, JobRunner] = {}
        self._lock = threading.Lock()

    def handlers(self) -> dict:
        return {
            "ping": self.ping, "start_job": self.start_job, "status": self.status, "losses": self.losses,
            "checkpoint_and_pause": self.checkpoint_and_pause, "send_checkpoint": self.send_checkpoint,
            "load_and_resume": self.load_and_resume, "resume": self.resume, "free": self.free,
            "set_throughput": self.set_throughput, "set_throughputs": self.set_throughputs,
        }

    def _job(self, job_id: str) -> JobRunner:
        runner = self.jobs.get(job_id)
        if runner is None:
            raise RequestRefused(f"no job {job_id!r} at site {self.site}")
        return runner

    # -- commands ---------------------------------------------------------------------------------
    def ping(self, args) -> dict:
        return {"site": self.site, "jobs": {j: r.status() for j, r in self.jobs.items()}}

    def start_job(self, args) -> dict:
        from testbed.nodes.job import TrainingJob

        if args.job_id in self.jobs:
            raise RequestRefused(f"job {args.job_id!r} already exists at {self.site}")
        if args.program is not None:  # a user's training program (testbed.userjob)
            return userjob.start_job(self, args)
        try:
            job = TrainingJob.create(args.family, seed=args.seed, model_mb=args.model_mb)
        except ValueError as e:  # a model_mb below the stand-in's own size
            raise RequestRefused(f"args.model_mb: {e}") from None
        runner = JobRunner(job, steps_per_s=args.steps_per_s, max_steps=args.max_steps)
        self.jobs[args.job_id] = runner
        runner.start()
        return runner.status()

    def status(self, args) -> dict:
        return self._job(args.job_id).status()

    def losses(self, args) -> dict:
        return {"losses": self._job(args.job_id).losses()}

    def checkpoint_and_pause(self, args) -> dict:
        """Pause the job, then save its checkpoint (serialise, hash, write, fsync): timed apart."""
        from testbed.nodes.checkpoint import save

        runner = self._job(args.job_id)
        if userjob.is_user_job(runner):
            return userjob.checkpoint_and_pause(self, runner)
        t0 = time.perf_counter()
        runner.pause()
        t_pause = time.perf_counter() - t0
        path = self.ckpts / f"{args.job_id}.pt"
        info = save(runner.job, path)
        return {"path": str(path), "size_bytes": info.size_bytes, "sha256": info.sha256, "step": info.step,
                "t_checkpoint_s": time.perf_counter() - t0, "t_pause_s": t_pause, "t_save_s": info.t_save_s}

    def send_checkpoint(self, args) -> dict:
        """The checkpoint file, then ``ballast_bytes`` of ballast (written to a file first, fsynced,
        timed as ``t_ballast_save_s``: the rest of a checkpoint of the scaled size goes through the
        same disk path), through the transfer service; the destination stores both. ``save_top_up``:
        what a save of fewer than ``SAMPLE_MIN_BYTES`` lacks to measure the disk's throughput, and the
        per-file part (``testbed.transfer.disk_io.save_top_up``)."""
        from testbed.transfer.client import send
        from testbed.transfer.disk_io import save_top_up, write_file
        from testbed.transfer.source import BallastSource, ConcatSource, FileSource

        self._job(args.job_id)
        path = self.ckpts / f"{args.job_id}.pt"
        if not path.exists():
            raise RequestRefused(f"job {args.job_id!r} has no checkpoint: call checkpoint_and_pause first")
        ballast = self.ckpts / f"{args.job_id}.ballast"
        t_ballast = 0.0
        try:
            parts = [FileSource(path)]
            if args.ballast_bytes:
                t_ballast = write_file(ballast, BallastSource(args.ballast_bytes, seed=7)).seconds
                parts.append(FileSource(ballast))
            top_up = save_top_up(self.ckpts, path.stat().st_size + args.ballast_bytes)
            source = ConcatSource(*parts) if len(parts) > 1 else parts[0]
            chunk = min(4 << 20, max(64 << 10, source.size_bytes // 16))
            source.manifest(chunk)  # hashing is part of checkpointing, not of the transfer
            report = send(args.dst_addr, args.dst_port, source, transfer_id=args.transfer_id, token=self.token,
                          chunk_bytes=chunk, deadline_s=args.deadline_s)
        finally:
            ballast.unlink(missing_ok=True)
        return {"report": report.to_dict(), "checkpoint_bytes": path.stat().st_size,
                "ballast_bytes": args.ballast_bytes, "t_ballast_save_s": t_ballast, "save_top_up": top_up.to_dict()}

    def received_checkpoint(self, args) -> "Received":
        """The received file (checkpoint + ballast) made durable (fsync) and the checkpoint at its
        front read back from the device (page cache dropped); ``t0`` is when this began; then the
        load sample's top-up (``testbed.transfer.disk_io.load_top_up``), timed apart."""
        from testbed.transfer.disk_io import load_top_up, persist, read_back

        path = self.incoming / args.transfer_id
        if not path.is_file():
            raise RequestRefused(f"no received checkpoint {args.transfer_id!r} at {self.site}")
        t0 = time.perf_counter()
        durable = persist(path)
        size = durable.n_bytes
        keep = size if args.checkpoint_bytes is None else args.checkpoint_bytes
        if keep > size:
            raise RequestRefused(f"received {args.transfer_id!r} holds {size} bytes, fewer than the checkpoint's {keep}")
        read, data = read_back(path, keep=keep)
        return Received(path, keep, durable, read, data, t0, load_top_up(self.incoming, size))

    def load_and_resume(self, args) -> dict:
        """Make the received file durable (fsync), read it back from the device (page cache
        dropped), verify and deserialise the checkpoint at its front (``torch.load``), restore the
        job and resume it; each step timed. The received file is removed once loaded."""
        from testbed.nodes.checkpoint import job_from_state, state_from_bytes

        if args.job_id in self.jobs:
            raise RequestRefused(f"job {args.job_id!r} already runs at {self.site}")
        if args.program is not None:
            return userjob.load_and_resume(self, args)
        got = self.received_checkpoint(args)
        path, durable, read, data, t0 = got.path, got.durable, got.read, got.data, got.t0
        t1 = time.perf_counter()
        state = state_from_bytes(data, path, expect_sha256=args.sha256)  # CheckpointError (typed) on a bad file
        t2 = time.perf_counter()
        job = job_from_state(state, path)
        runner = JobRunner(job, steps_per_s=args.steps_per_s, max_steps=args.max_steps)
        resumed_at = runner.status()["steps"]  # before it runs: a busy machine let it step once before the read
        self.jobs[args.job_id] = runner
        runner.start()
        t3 = time.perf_counter()
        path.unlink(missing_ok=True)
        return {"t_load_s": t3 - t0, "step": resumed_at, "bytes_read": read.n_bytes,
                "t_persist_s": durable.seconds, "t_read_s": read.seconds, "t_deserialize_s": t2 - t1,
                "t_restore_s": t3 - t2, "load_top_up": got.top_up.to_dict()}

    def resume(self, args) -> dict:
        runner = self._job(args.job_id)
        if userjob.is_user_job(runner):
            return userjob.resume(runner)
        runner.resume()
        return runner.status()

    def free(self, args) -> dict:
        runner = self.jobs.pop(args.job_id, None)
        if runner is None:
            raise RequestRefused(f"no job {args.job_id!r} at site {self.site}")
        runner.stop()
        (self.ckpts / f"{args.job_id}.pt").unlink(missing_ok=True)
        return {"freed": args.job_id}

    def set_throughput(self, args) -> dict:
        """Slow job ``job_id`` to ``frac`` of its reference pace (an emulated GPU power cap); see
        :mod:`testbed.agent.runner` for the mechanism. The first call gives the job a throttle."""
        runner = self._job(args.job_id)
        if userjob.is_user_job(runner):
            return userjob.set_throughput(args, runner)
        throttle = None
        if runner.throttle is None:
            throttle = self._new_throttle(args.job_id, runner)
        try:
            result = runner.set_throughput(args.frac, throttle, cap_w=args.cap_w)
        except BaseException:
            if throttle is not None and runner.throttle is not throttle:
                throttle.close()
            raise
        return {"job_id": args.job_id, **result,
                "throttle_reason": runner.throttle.reason if runner.throttle else ""}

    def set_throughputs(self, args) -> dict:
        """:meth:`set_throughput` for each item, in order, in one round trip: ``results`` holds one
        answer per item, ``{"ok": true, "result": ...}`` or ``{"ok": false, "error": ...}`` (a job that
        left the agent is refused alone)."""
        from testbed.errors import TestbedError

        results = []
        for item in args.items:
            try:
                results.append({"ok": True, "result": self.set_throughput(item)})
            except (RequestRefused, TestbedError, ValueError) as e:
                results.append({"ok": False, "error": f"set_throughput {item.job_id}: {e}"})
        return {"results": results}

    def _new_throttle(self, job_id: str, runner: JobRunner):
        from testbed.power.throttle.throttle import DutyCycleThrottle, make_throttle

        if runner.native_id is None:
            raise RequestRefused(f"job {job_id!r} has no running thread")
        if not self.run_id:
            throttle = DutyCycleThrottle()
            throttle.reason = "the agent has no run id to label a cgroup with"
            return throttle
        try:
            throttle = make_throttle(self.run_id, f"{self.site}-{job_id}", threads=True)
        except ValueError as e:
            raise RequestRefused(str(e)) from None
        try:
            throttle.add_tid(runner.native_id)
        except BaseException:
            throttle.close()
            raise
        return throttle

    def shutdown(self) -> None:
        """Stop every job; their threads end and their throttle cgroups are removed."""
        jobs, self.jobs = list(self.jobs.values()), {}
        errors = []
        for runner in jobs:
            try:
                runner.stop()
            except Exception as e:  # stop the others first, then report
                errors.append(e)
        if errors:
            raise errors[0]
