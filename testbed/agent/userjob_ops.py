"""The node agent's commands for a job that is a user's program (:class:`testbed.userjob.runner.UserJobRunner`):
the same answers as for the stand-in training, so the controller's migration and its records are
the same. ``testbed.agent.agent`` calls these where a command meets a user job (testbed.userjob sits
below the agent: the program's contract and runner, which know nothing of the agent)."""

from __future__ import annotations

import hashlib
import os
import time

from testbed.agent.protocol import RequestRefused
from testbed.userjob.runner import UserJobError, UserJobRunner


def _runner(agent, args) -> UserJobRunner:
    return UserJobRunner(args.program, job_id=args.job_id, job_dir=agent.workdir / "user-jobs" / args.job_id,
                         ckpt_path=agent.ckpts / f"{args.job_id}.pt", seed=getattr(args, "seed", None),
                         steps_per_s=args.steps_per_s, max_steps=args.max_steps, run_id=agent.run_id,
                         throttle_tag=f"{agent.site}-{args.job_id}")


def start_job(agent, args) -> dict:
    runner = _runner(agent, args)
    try:
        runner.start()
    except (UserJobError, OSError) as e:
        runner.kill()
        raise RequestRefused(str(e)) from None
    agent.jobs[args.job_id] = runner
    return runner.status()


def checkpoint_and_pause(agent, runner: UserJobRunner) -> dict:
    """SIGTERM: the program checkpoints to the agent's checkpoint path and exits; fsync + SHA-256.
    ``t_save_s``: SIGTERM to exit (its last step and its write) + fsync + hash; the pause is inside it."""
    try:
        ck = runner.checkpoint_and_stop()
    except UserJobError as e:
        raise RequestRefused(str(e)) from None
    return {"path": str(ck.path), "size_bytes": ck.size_bytes, "sha256": ck.sha256, "step": ck.step,
            "t_checkpoint_s": ck.t_stop_s + ck.t_sync_s, "t_pause_s": 0.0, "t_save_s": ck.t_stop_s + ck.t_sync_s}


def load_and_resume(agent, args) -> dict:
    """The received file (checkpoint + ballast) made durable, read back from the device, its front
    verified (SHA-256) and kept as the job's checkpoint; the program started from it. ``t_deserialize_s``:
    the hash + the program's own start and load (until its first progress line)."""
    got = agent.received_checkpoint(args)
    path, keep, durable, read, data, t0 = got.path, got.keep, got.durable, got.read, got.data, got.t0
    t_hash = time.perf_counter()
    if hashlib.sha256(data).hexdigest() != args.sha256:
        raise RequestRefused(f"checkpoint {args.transfer_id!r}: SHA-256 mismatch (corrupted in transit?)")
    t_hash_s = time.perf_counter() - t_hash
    runner = _runner(agent, args)
    os.truncate(path, keep)  # the ballast behind it goes; the checkpoint stays, as the program wrote it
    os.replace(path, runner.ckpt_path)
    try:
        t_start = runner.start(resume_from=runner.ckpt_path)
    except (UserJobError, OSError) as e:
        runner.kill()
        raise RequestRefused(str(e)) from None
    agent.jobs[args.job_id] = runner
    return {"t_load_s": time.perf_counter() - t0, "step": runner.started_at_step, "bytes_read": read.n_bytes,
            "t_persist_s": durable.seconds, "t_read_s": read.seconds,
            "t_deserialize_s": t_hash_s + t_start, "t_restore_s": 0.0, "load_top_up": got.top_up.to_dict()}


def resume(runner: UserJobRunner) -> dict:
    try:
        runner.resume()
    except (UserJobError, OSError) as e:
        raise RequestRefused(str(e)) from None
    return runner.status()


def set_throughput(args, runner: UserJobRunner) -> dict:
    return {"job_id": args.job_id, **runner.set_throughput(args.frac, cap_w=args.cap_w)}


def is_user_job(runner) -> bool:
    return isinstance(runner, UserJobRunner)


__all__ = ["checkpoint_and_pause", "is_user_job", "load_and_resume", "resume", "set_throughput", "start_job"]
