"""``testbed sweep``: run a plan's trials (locally or on Ray), resume, record, aggregate.

The sweep directory::

    <out>/sweep.yaml            copy of the sweep file
    <out>/sweep.json            the plan: cells, their parameters and overrides, trials, code versions
    <out>/trials/<cell>/seed-<s>/   one ``testbed run`` results directory per trial, plus
                                trial.json (status, error, wall time, host; written last: the done
                                marker) and trial.log (what the run printed)
    <out>/trials.csv            per trial: status, wall time, host, error
    <out>/results.parquet|csv   per trial x policy: parameters, seed, summary metrics
    <out>/table.csv|md          per cell x policy x metric: n, mean, std, ci95

A trial is skipped when its trial.json says done with the same key (scenario, seed, substrate),
so re-running a sweep after an interruption or a failure runs only what is missing.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from testbed.errors import SpecError
from testbed.progress import eta_s, fmt_duration
from testbed.recorder.manifest import git_state, package_versions
from testbed.recorder.reader import SWEEP_FORMAT
from testbed.node_kinds import NODE_RUNTIMES
from testbed.substrate import SUBSTRATES
from testbed.sweep.aggregate import write_outputs
from testbed.sweep.plan import SweepPlan, Trial
from testbed.sweep.trial import DONE, TrialTask, unpack

EMULATION_CPUS_PER_TRIAL = 2   # a relay, a transfer server and a client per trial: keep them off each other's core
OUR_FILES = ("sweep.yaml", "sweep.json", "trials.csv", "results.parquet", "results.csv", "table.csv", "table.md",
             "index.html")
TRIAL_FORMAT = "testbed-sweep-trial/1"


@dataclass
class SweepOutcome:
    out: Path
    planned: int
    skipped: int
    ran: int
    failed: list[str] = field(default_factory=list)
    parallel: int = 1
    backend: str = "local"
    wall_s: float = 0.0


def parallel_for(plan: SweepPlan, requested: int | None, n_todo: int, *,
                 ray: bool = False) -> tuple[int, str | None]:
    """Workers: --parallel, else the file's ``parallel``, else min(CPUs, trials) (for emulation 1: one
    trial at a time unless asked). Emulation trials side by side on this machine (local, N > 1) each get
    an equal CPU share (:mod:`testbed.sweep.share`); more of them than this machine has CPUs, or on a
    substrate whose runs cannot share a machine, are refused with a :class:`SpecError` naming the option
    that asked. On Ray (``ray``) the trials spread over the cluster's nodes: for emulation the number is
    capped at CPUs / 2 of this machine (``--ray local``) with a note, as Ray gives each trial 2 CPUs."""
    cpus = os.cpu_count() or 1
    kind = SUBSTRATES.get(plan.substrate)
    if not kind.live:
        return max(1, requested or plan.sweep.spec.parallel or min(cpus, max(n_todo, 1))), None
    n = requested or plan.sweep.spec.parallel or 1
    if ray:
        cap = max(1, cpus // EMULATION_CPUS_PER_TRIAL)
        if n > cap:
            return cap, f"{plan.substrate} trials: parallelism capped at {cap} ({cpus} CPUs / {EMULATION_CPUS_PER_TRIAL})"
        return n, None
    if n == 1:
        return 1, None
    field = "--parallel" if requested else f"{plan.sweep.path}: parallel"
    if why := kind.parallel_problem():
        raise SpecError([(field, f"{plan.substrate} trials run one at a time on one machine ({why}); "
                                 f"got {n}: use 1")])
    for cell in plan.cells:  # a node runtime whose runs cannot share a machine (docker: its engine's image cache)
        runtime = cell.loaded.scenario.emulation.runtime
        if why := NODE_RUNTIMES.get(runtime).one_at_a_time:
            raise SpecError([(field, f"trials with emulation.runtime {runtime} run one at a time on one machine (cell "
                                     f"{cell.id}): {why}; got {n}: use 1")])
    if n > cpus:
        raise SpecError([(field, f"{n} {plan.substrate} trials at once need at least {n} CPUs and this machine "
                                 f"has {cpus}: at most {cpus}")])
    n = min(n, max(n_todo, 1))
    return n, (f"{plan.substrate} trials: {n} at once on {cpus} CPUs, each in a cgroup with an equal CPU share"
               if n > 1 else None)


def read_record(out: Path, trial: Trial) -> dict | None:
    try:
        rec = json.loads((out / trial.rel_dir / "trial.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    return rec if isinstance(rec, dict) else None  # a damaged record: the trial runs again


def is_done(out: Path, trial: Trial) -> bool:
    rec = read_record(out, trial)
    return bool(rec) and rec.get("status") in DONE and rec.get("key") == trial.key


def check_sweep_out(out: Path, plan: SweepPlan, force: bool = False) -> Path:
    """May ``out`` hold this sweep? A new or empty directory, or one carrying a sweep's marker (sweep.json
    with a testbed-sweep format: resumed, or cleared with --force); never the sweep or scenario file's
    folder, never anything else (testbed/recorder/out_dir.py). Returns the absolute path."""
    from testbed.recorder.out_dir import check_out_dir

    return check_out_dir(out, kind="sweep", force=force,
                         protect=(plan.sweep.path, plan.sweep.scenario_path)).path


def prepare_out(out: Path, plan: SweepPlan, force: bool, argv: list[str]) -> Path:
    """Create or reuse ``out`` (checked by :func:`check_sweep_out`); --force removes what an earlier sweep
    wrote there (and nothing else). The marker, sweep.json, is written first."""
    out = check_sweep_out(out, plan, force)
    made = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    try:
        _write_json(out / "sweep.json", sweep_manifest(plan, argv))
    except BaseException:
        if made:
            shutil.rmtree(out, ignore_errors=True)
        raise
    if force:
        shutil.rmtree(out / "trials", ignore_errors=True)
        for name in OUR_FILES:
            if name != "sweep.json":
                (out / name).unlink(missing_ok=True)
    (out / "trials").mkdir(exist_ok=True)
    (out / "sweep.yaml").write_text(plan.sweep.text, encoding="utf-8")
    return out


def clear_stale(out: Path, todo: list[Trial]) -> None:
    """Remove what an earlier attempt left in the directories of trials about to run (a failed attempt's
    trial.json/log, a run with another key): ``out`` is a sweep directory checked by prepare_out."""
    for t in todo:
        d = out / t.rel_dir
        if d.is_symlink():
            d.unlink()
        elif d.exists():
            shutil.rmtree(d)


def sweep_manifest(plan: SweepPlan, argv: list[str]) -> dict:
    sw = plan.sweep
    return {
        "format": SWEEP_FORMAT,
        "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": argv,
        "sweep": {"name": sw.name, "path": str(sw.path), "sha256": sw.sha256, "copy": "sweep.yaml"},
        "scenario": {"path": str(sw.scenario_path), "sha256": plan.base.sha256},
        "substrate": plan.substrate,
        "param_columns": list(plan.columns.values()),
        "param_paths": {c: p for p, c in plan.columns.items()},
        "cells": [{"id": c.id, "variant": c.variant, "params": c.params, "overrides": c.overrides} for c in plan.cells],
        "trials": [{"dir": t.rel_dir, "cell": t.cell.id, "seed": t.seed, "key": t.key} for t in plan.trials],
        "git": git_state(),
        "versions": package_versions(),
    }


def _write_json(path: Path, data: object) -> None:
    """Write-then-rename, so a reader never sees half a file (trial.json is the done marker)."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def record(out: Path, trial: Trial, result: dict, backend: str, substrate: str) -> None:
    """Write one trial's outcome: its run directory (if packed), trial.log, then trial.json."""
    d = out / trial.rel_dir
    if result["status"] in DONE and "archive" in result:
        unpack(result["archive"], d)
    elif result["status"] not in DONE:
        shutil.rmtree(d, ignore_errors=True)  # an older attempt of this trial: stale now
    d.mkdir(parents=True, exist_ok=True)
    (d / "trial.log").write_text(result.get("log") or "", encoding="utf-8")
    _write_json(d / "trial.json", {
        "format": TRIAL_FORMAT, "cell": trial.cell.id, "seed": trial.seed, "key": trial.key,
        "params": trial.cell.params, "overrides": trial.cell.overrides, "substrate": substrate,
        "status": result["status"], "error": result.get("error"), "traceback": result.get("traceback"),
        "wall_s": result.get("wall_s"), "host": result.get("host"), "backend": backend,
        "ray_node": result.get("ray_node"), "cpu_share": result.get("cpu_share"),
    })


def _trials_csv(out: Path, plan: SweepPlan) -> list[str]:
    rows, failed = [], []
    for t in plan.trials:
        rec = read_record(out, t) or {}
        status = rec.get("status", "missing") if rec.get("key") == t.key else "missing"
        if status not in DONE:
            failed.append(t.rel_dir)
        rows.append({"dir": t.rel_dir, "cell": t.cell.id, "seed": t.seed, "status": status,
                     "wall_s": rec.get("wall_s"), "host": rec.get("host"), "backend": rec.get("backend"),
                     "error": rec.get("error")})
    pd.DataFrame(rows).to_csv(out / "trials.csv", index=False)
    return failed


def run_sweep(plan: SweepPlan, out: Path, *, parallel: int | None = None, ray_address: str | None = None,
              force: bool = False, argv: list[str] | None = None, log=None) -> SweepOutcome:
    """Run every trial that is not done yet, then aggregate everything that is done. Progress to ``log``
    (default: stderr)."""
    t0 = time.perf_counter()
    log = log or sys.stderr
    argv = list(argv or [])
    made = not os.path.lexists(out)
    out = prepare_out(Path(out), plan, force, argv)
    todo = [t for t in plan.trials if not is_done(out, t)]
    clear_stale(out, todo)
    backend = f"ray:{ray_address}" if ray_address else "local"
    n_par, note = parallel_for(plan, parallel, len(todo), ray=bool(ray_address))
    if note:
        print(note, file=log)
    outcome = SweepOutcome(out=out, planned=len(plan.trials), skipped=len(plan.trials) - len(todo), ran=len(todo),
                           parallel=n_par, backend=backend)
    print(f"sweep {plan.sweep.name}: {len(plan.cells)} cells x {len(plan.trials) // max(len(plan.cells), 1)} seeds = "
          f"{len(plan.trials)} trials on {plan.substrate}; {outcome.skipped} done already, {len(todo)} to run "
          f"({backend}, parallel {n_par})", file=log)
    by_dir = {t.rel_dir: t for t in todo}
    # emulation trials side by side on this machine: each in a cgroup of its own (testbed/sweep/share.py)
    share = n_par if n_par > 1 and not ray_address and SUBSTRATES.get(plan.substrate).live else 0
    jobs = [TrialTask(rel_dir=t.rel_dir, loaded=t.cell.loaded, seed=t.seed, substrate=plan.substrate,
                     out_dir=str(out / t.rel_dir), argv=tuple(argv), share=share) for t in todo]
    finished = 0
    t_run = time.perf_counter()

    def on_result(job: TrialTask, result: dict) -> None:
        nonlocal finished
        finished += 1
        record(out, by_dir[job.rel_dir], result, backend, plan.substrate)
        took = f" in {result['wall_s']:.1f} s" if result.get("wall_s") is not None else ""
        extra = f": {result['error']}" if result["status"] not in DONE else ""
        left = eta_s(finished, len(jobs), time.perf_counter() - t_run)
        eta = f"; ETA {fmt_duration(left)}" if left is not None and finished < len(jobs) else ""
        print(f"[{finished}/{len(jobs)}] {job.rel_dir}: {result['status']}{took}{extra}{eta}", file=log)

    try:
        if jobs and ray_address:
            from testbed.sweep.ray_backend import run_ray

            per_trial = EMULATION_CPUS_PER_TRIAL if SUBSTRATES.get(plan.substrate).live else 1
            run_ray(jobs, ray_address, num_cpus=n_par * per_trial, cpus_per_trial=per_trial,
                    max_in_flight=parallel, on_result=on_result)
        elif jobs:
            from testbed.sweep.local import run_local

            run_local(jobs, n_par, on_result)
    except BaseException:
        if made and finished == 0:  # this command made the directory and nothing ran in it: leave nothing
            from testbed.lifecycle import critical

            with critical():
                shutil.rmtree(out, ignore_errors=True)
        raise
    outcome.failed = _trials_csv(out, plan)
    done = {t.rel_dir for t in plan.trials if is_done(out, t)}
    write_outputs(out, plan, done, len(outcome.failed))
    from testbed.html.writer import write_sweep_page

    write_sweep_page(out, argv)  # index.html and the sweep's report (report/)
    outcome.wall_s = time.perf_counter() - t0
    return outcome
