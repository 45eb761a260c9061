"""``testbed validate FILE...``: check scenario, sweep and topology files the way ``run``, ``sweep``
and ``net up`` would.

For each file: the fields, the files it names (topology, trace files: opened and read through
the same loaders as a run, so validate and run never disagree), and the size of the work it asks
for (``limits:``). A sweep file (it names a ``scenario:`` and has no ``traces:``) is checked as
a sweep: its grid size, then every cell's scenario. Prints ``FILE: ok (...)`` for a good file and
one ``FILE: field.path: message`` line per problem on stderr for a bad one, goes on with the next
file, and exits 2 if any file is bad. A topology file (sites and links only) is checked as the
topology ``testbed net up`` and a scenario's ``topology:`` read.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("validate", help="check scenario, sweep and topology files, and the trace files they name "
                                        "(exit 2 and one line per problem if any is invalid)")
    p.add_argument("files", nargs="+", metavar="FILE", help="scenario, sweep or topology YAML file(s)")
    p.set_defaults(func=_validate)


def _check_inputs(sc, jobs: bool = True) -> None:
    """Build what a run builds before its first step: traces (files opened), forecasts, jobs."""
    from testbed.inputs import build_inputs, require_jobs

    inputs = build_inputs(sc)
    if jobs:
        require_jobs(inputs)


def _check_scenario(path: str) -> str:
    from testbed.spec import load_scenario

    sc = load_scenario(path).scenario
    _check_inputs(sc)
    return (f"{len(sc.sites)} sites, {len(sc.links)} links, {len(sc.policies)} policies, "
            f"{sc.duration_h:g} h at {sc.step_s:g} s steps")


def _check_topology(path: str) -> str:
    from testbed.spec.topology import read_topology

    topo = read_topology(Path(path))
    return (f"topology file, {len(topo.sites)} sites, {len(topo.links)} links: `testbed net up {path}` takes it, "
            "and a scenario names it in `topology:`")


def _check_sweep(path: str) -> str:
    from testbed.errors import SpecError
    from testbed.sweep import load_sweep_file, plan_sweep
    from testbed.sweep.spec import canonical

    sweep = load_sweep_file(path)
    plan = plan_sweep(sweep, "sim")  # "sim": the substrate only names trials; no machine probe here
    seen: set[str] = set()
    _check_draws(sweep, plan)
    for cell in plan.cells:
        sc = cell.loaded.scenario
        key = canonical(sc.model_dump(mode="json", include={"start", "duration_h", "step_s", "sites", "links", "traces"}))
        if key in seen:
            continue
        seen.add(key)
        try:
            _check_inputs(sc, jobs=False)  # jobs: per trial seed, in _check_draws
        except SpecError as e:
            raise SpecError([(sweep.problem(f"cell {cell.id}: {w}"), m) for w, m in e.problems]) from None
    return f"sweep of {len(plan.cells)} cells, {len(plan.trials)} trials"


def _check_draws(sweep, plan) -> None:
    """Every trial of a migration study with only Poisson arrivals must draw at least one job
    (the draw depends on the trial's seed, so build_inputs on one seed would not tell)."""
    from testbed.errors import SpecError
    from testbed.workload import generate_jobs

    problems = []
    for trial in plan.trials:
        sc = trial.cell.loaded.scenario
        if sc.workloads is None or sc.workloads.jobs:
            continue
        if not generate_jobs(sc.model_copy(update={"seed": trial.seed})):
            problems.append((sweep.problem(f"{trial.rel_dir}: workloads.arrivals.jobs_per_day"),
                             "the arrivals draw no job within the run: raise jobs_per_day or until_h, or list jobs"))
    if problems:
        raise SpecError(problems)


def check_file(path: str) -> tuple[str | None, list[str]]:
    """``(summary, [])`` if ``path`` is valid, else ``(None, problem lines)``; lines name the file."""
    from testbed.errors import SpecError, TestbedError, TraceError
    from testbed.spec.kinds import file_kind
    from testbed.spec.load import read_yaml

    check = {"sweep": _check_sweep, "topology": _check_topology, "scenario": _check_scenario}
    try:
        data = read_yaml(Path(path), "scenario file")
        return check[file_kind(data) or "scenario"](path), []
    except SpecError as e:
        return None, e.in_file(path).lines()
    except TraceError as e:
        return None, SpecError([(e.where, e.message)]).in_file(path).lines()
    except TestbedError as e:
        return None, [f"{path}: {e}"]
    except RecursionError:
        return None, [f"{path}: nested too deeply to check"]
    except MemoryError:
        return None, [f"{path}: ran out of memory while checking it (see the limits: block, docs/reference/scenario-files.md)"]


def _validate(args: argparse.Namespace) -> int:
    bad = 0
    for path in args.files:
        summary, problems = check_file(path)
        if problems:
            bad += 1
            for line in problems:
                print(f"error: {line}", file=sys.stderr)
        else:
            print(f"{path}: ok ({summary})")
    return 2 if bad else 0
