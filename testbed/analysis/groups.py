"""Which runs ``testbed report`` may pool as the seeds of one setting, and the inputs it refuses.

A group is the set of runs of one experiment (the same ``Run.scenario_hash``: the resolved scenario
without its seed, testbed.analysis.scenario_id) on one substrate in one sweep cell; the report labels
it (scenario name, substrate, cell) and pools its runs by that label (testbed.analysis.claims). So
that a label always means one experiment and every run in it is another seed, ``check_groups`` refuses:

- different experiments under one label (the same scenario name, substrate and cell, e.g. a 48 h
  and a 24 h run of one file through ``--set``): they are not seeds of one setting;
- the same seed twice in a group (two runs of one experiment at one seed), and one run directory
  given twice (also a sweep beside one of its own trials): one result would count as two seeds.

Each refusal is one ReportError line naming the two run directories and, for different experiments,
the first resolved field that differs (its dotted path, never its value). Runs of differently named
scenarios, other cells or other substrates are separate groups: a report over several sweeps is
normal. The same experiment in two cells (a sweep's baseline cell that another sweep also has, e.g.
validate-alpha's alpha = 0.1 and validate-degradation's 0 %, at the same seeds) stays two groups,
never pooled: their seeds would count twice.
"""

from __future__ import annotations

from pathlib import Path

from testbed.analysis.scenario_id import experiment, first_difference
from testbed.analysis.validation import ReportError, Run


def _resolved(path: Path) -> Path:
    try:
        return Path(path).resolve()
    except OSError:
        return Path(path)


def _twice(first: Run, run: Run) -> ReportError:
    if _resolved(first.path) == _resolved(run.path):
        return ReportError(f"{run.path}: given twice (one run would count as two seeds); give each run once")
    return ReportError(f"{first.path} and {run.path}: the same experiment on {run.substrate} at the same seed "
                       f"({run.seed}): one result would count as two seeds; give each run once")


def _mixed(first: Run, run: Run) -> ReportError:
    if not first.scenario_hash or not run.scenario_hash:
        field = f"scenario.resolved (not recorded in {(first if not first.scenario_hash else run).path / 'manifest.json'})"
    else:
        field = first_difference(experiment(first.resolved), experiment(run.resolved)) or "the resolved scenario"
    cell = f", cell {run.cell}" if run.cell else ""
    return ReportError(f"{first.path} and {run.path}: the same scenario name on {run.substrate}{cell} but different "
                       f"experiments (they differ in {field}), not seeds of one setting; report them separately")


def check_groups(runs: list[Run]) -> None:
    """Raise ReportError (one line) if a run directory is given twice, if two runs under one label
    (scenario name, substrate, cell) ran different experiments, or if two runs of one group share a
    seed; see the module docstring."""
    where: dict[Path, int] = {}
    for i, run in enumerate(runs):
        first = where.setdefault(_resolved(run.path), i)
        if first != i:
            raise _twice(runs[first], run)
    by_label: dict[tuple[str, str, str], int] = {}
    by_seed: dict[tuple[str, str, str, int], int] = {}
    for i, run in enumerate(runs):
        first = by_label.setdefault((run.scenario, run.substrate, run.cell), i)
        if runs[first].scenario_hash != run.scenario_hash:
            raise _mixed(runs[first], run)
        first = by_seed.setdefault((run.scenario, run.substrate, run.cell, run.seed), i)
        if first != i:
            raise _twice(runs[first], run)


def groups(runs: list[Run]) -> dict[tuple[str, str, str], list[Run]]:
    """The runs per group, in the order given: {(scenario_hash, substrate, cell): runs}. Once
    ``check_groups`` has passed, each group is one label's runs, one seed each."""
    out: dict[tuple[str, str, str], list[Run]] = {}
    for run in runs:
        out.setdefault((run.scenario_hash, run.substrate, run.cell), []).append(run)
    return out
