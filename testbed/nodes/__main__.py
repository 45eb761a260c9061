"""``python -m testbed.nodes run|families``: train a job in this process (optionally resuming from a
checkpoint and saving one), or list the workloads with their sizes and speed.

``run`` prints one JSON object (family, workload, steps_done, last loss, parameter SHA-256,
checkpoint info, evaluation); ``--losses-out`` writes the job's *whole* loss history (including
the steps before a resume) as JSON, each loss also as ``float.hex`` so two runs compare bit for bit.
Exit status: 0, 1 on a checkpoint error, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from testbed.nodes import checkpoint, workloads
from testbed.nodes.errors import CheckpointError
from testbed.nodes.job import TrainingJob
from testbed.nodes.throughput import checkpoint_size_bytes, measure_throughput


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m testbed.nodes", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="train a job for --steps steps")
    r.add_argument("--family", default=None, help="scenario family or workload name (from --resume if omitted)")
    r.add_argument("--seed", type=int, default=None, help="job seed (from --resume if omitted, else 0)")
    r.add_argument("--steps", type=int, required=True, help="steps to run now (after the resume point)")
    r.add_argument("--resume", default=None, metavar="CKPT")
    r.add_argument("--save", default=None, metavar="CKPT")
    r.add_argument("--losses-out", default=None, metavar="FILE")
    r.add_argument("--device", default=None, help="cpu, cuda, cuda:1 (default: cuda if available)")
    r.add_argument("--threads", type=int, default=1)
    r.add_argument("--eval", action="store_true", help="evaluate on the test split at the end")
    f = sub.add_parser("families", help="workloads, parameter counts, checkpoint sizes, steps/s")
    f.add_argument("--measure-s", type=float, default=0.0, help="time each workload this long (0: skip)")
    f.add_argument("--json", action="store_true")
    return p


def _run(args: argparse.Namespace) -> int:
    if args.steps < 0:
        print("run: --steps must be >= 0", file=sys.stderr)
        return 2
    if args.resume:
        job = checkpoint.load(args.resume, device=args.device, threads=args.threads)
        for name, want in (("family", args.family), ("seed", args.seed)):
            if want is not None and getattr(job, name) != want:
                print(f"run: --{name} {want} but {args.resume} holds {getattr(job, name)}", file=sys.stderr)
                return 2
    elif args.family is None:
        print("run: give --family (or --resume)", file=sys.stderr)
        return 2
    else:
        job = TrainingJob.create(args.family, args.seed or 0, device=args.device, threads=args.threads)
    job.run(args.steps)
    out = {"family": job.family, "workload": job.workload.name, "seed": job.seed, "steps_done": job.steps_done,
           "epoch": job.position.epoch, "index": job.position.index,
           "last_loss": job.loss_history[-1] if job.loss_history else None, "params_sha256": job.params_sha256()}
    if args.save:
        out["checkpoint"] = checkpoint.save(job, args.save).to_dict()
    if args.eval:
        out["eval"] = vars(job.evaluate())
    if args.losses_out:
        losses = job.loss_history
        Path(args.losses_out).write_text(json.dumps({**out, "losses": losses, "losses_hex": [x.hex() for x in losses]}))
    print(json.dumps(out), flush=True)
    return 0


def _families(args: argparse.Namespace) -> int:
    rows = []
    for name in workloads.names():
        job = TrainingJob.create(name, 0)
        row = {"workload": name, "stands_in_for": list(workloads.get(name).stands_in_for) or ["(default)"],
               "params": job.n_params, "batch_size": job.batch_size, "checkpoint_bytes": checkpoint_size_bytes(name)}
        if args.measure_s > 0:
            row["steps_per_s"] = round(measure_throughput(name, args.measure_s).steps_per_s, 1)
        rows.append(row)
    if args.json:
        print(json.dumps(rows))
    else:
        for row in rows:
            print("  ".join(f"{k}={v}" for k, v in row.items()))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _run(args) if args.cmd == "run" else _families(args)
    except CheckpointError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
