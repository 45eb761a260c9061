"""``testbed sweep SWEEP.yaml``: a grid of scenario variants x seeds, in parallel, one table with CIs
(a thin layer over :mod:`testbed.sweep.api`)."""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

from testbed.recorder.out_dir import results_root
from testbed.errors import SpecError
from testbed.cli import figure_options
from testbed.cli.choices import SubstrateChoices

MAX_PARALLEL = 4096  # trials at once: far beyond any machine's cores, short of a fork bomb


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sweep", help="run a grid of scenario variants x seeds (locally or on Ray); table with 95 %% CIs")
    p.add_argument("sweep", help="sweep YAML file (docs: How-to, 'Sweeps': docs/how-to/sweeps.md)")
    p.add_argument("--out", type=Path, default=None,
                   help="sweep directory (default results/sweep-NAME); re-running resumes: done trials are skipped")
    p.add_argument("--parallel", default=None,
                   help="trials at once (default: the file's 'parallel', else min(CPUs, trials); emulation: 1, "
                        "at most CPUs on netns, each trial with an equal CPU share)")
    p.add_argument("--ray", metavar="ADDRESS", default=None,
                   help="run each trial as a Ray task on the cluster at ADDRESS ('auto', 'ray://host:10001'), "
                        "or 'local' to start a private Ray instance for this sweep")
    p.add_argument("--substrate", choices=SubstrateChoices(), default=None,
                   help="override the file's substrate")
    p.add_argument("--force", action="store_true", help="re-run every trial (removes the earlier trials of the sweep in --out; "
                        "a directory that holds no sweep is never written)")
    p.add_argument("--dry-run", action="store_true", help="check everything and list the trials; run nothing")
    p.add_argument("--no-progress", action="store_true",
                   help="no line per finished trial (failures and the summary are still printed)")
    figure_options.add(p)
    p.set_defaults(func=_sweep)


def _parallel(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise SpecError([("--parallel", f"must be a positive integer (got {text!r})")])
    if n > MAX_PARALLEL:
        raise SpecError([("--parallel", f"at most {MAX_PARALLEL} trials at once (got {n})")])
    return n


def _dry_run(plan, out: Path, parallel: int | None, ray: bool) -> int:
    from testbed.sweep.runner import is_done, parallel_for

    todo = {t.rel_dir for t in plan.trials if not is_done(out, t)}
    n_par, note = parallel_for(plan, parallel, len(todo), ray=ray)
    print(f"sweep {plan.sweep.name}: scenario {plan.sweep.scenario_path}, substrate {plan.substrate} "
          f"({plan.substrate_why})")
    print(f"{len(plan.cells)} cells, {len(plan.trials)} trials: {len(plan.trials) - len(todo)} done in {out}, "
          f"{len(todo)} to run ({n_par} at a time locally)")
    for cell in plan.cells:
        params = ", ".join(f"{k}={v!r}" for k, v in cell.params.items()) or "(the scenario as it is)"
        print(f"  {cell.id}: {params}")
    for t in plan.trials:
        print(f"    {t.rel_dir}  {'to run' if t.rel_dir in todo else 'done'}")
    if note:
        print(note)
    return 0


def _sweep(args: argparse.Namespace) -> int:
    from testbed.sweep import api

    parallel = _parallel(args.parallel)
    figures = figure_options.applied(args)  # a bad format or style is refused before the plan is made
    plan = api.plan(args.sweep, args.substrate)
    sweep = plan.sweep
    out = args.out if args.out is not None else results_root() / f"sweep-{sweep.name}"
    from testbed.sweep.runner import check_sweep_out

    check_sweep_out(out, plan, args.force)
    if args.dry_run:
        return _dry_run(plan, out, parallel, bool(args.ray))
    print(f"substrate: {plan.substrate} ({plan.substrate_why})", file=sys.stderr)
    with figures:
        res = api.run(plan, out, parallel=parallel, ray=args.ray, force=args.force, argv=sys.argv,
                      log=io.StringIO() if args.no_progress else None)
    print(f"{res.planned} trials: {res.skipped} reused, {res.ran} run, {len(res.failed)} failed "
          f"({res.backend}, parallel {res.parallel}, {res.wall_s:.1f} s)")
    for rel in res.failed:
        print(f"failed: {rel} (see {res.out / rel / 'trial.json'})", file=sys.stderr)
    print(f"table: {res.out / 'table.md'}")
    print(f"page: {res.out / 'index.html'}")
    return 1 if res.failed else 0
