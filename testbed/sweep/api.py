"""A sweep from Python or the command line: check the file, plan, run, and return the table.

``testbed.sweep("sweeps/example-2x2x3.yaml")`` returns the statistics table (``table.csv``: per
cell x policy x metric, n, mean, std, ci95) as a DataFrame; ``df.attrs`` holds the sweep
directory (``path``), the per-trial results (``results``: ``results.parquet``) and the trials that
failed (``failed``). ``testbed sweep`` is a thin layer over :func:`plan` and :func:`run`.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import TextIO

import pandas as pd

from testbed.errors import SpecError, TestbedError
from testbed.spec.kinds import SCENARIO_KEYS, is_sweep, wrong_kind  # noqa: F401  (both also imported from here)
from testbed.spec.load import read_yaml
from testbed.sweep.plan import SweepPlan, plan_sweep
from testbed.sweep.runner import SweepOutcome, run_sweep
from testbed.sweep.spec import load_sweep_file


def plan(path: str | os.PathLike, substrate: str | None = None) -> SweepPlan:
    """The checked plan of a sweep file; a scenario or topology file given instead is refused in one line."""
    path = Path(path)
    data = read_yaml(path, "sweep file")
    why = wrong_kind(data, path, "sweep") if any(k in data for k in SCENARIO_KEYS) else None
    if why is not None:
        raise SpecError([(str(path), f"{why} (a sweep file names a `scenario:` file and a `grid:` of values)")])
    return plan_sweep(load_sweep_file(path), substrate)


def run(plan_: SweepPlan, out: str | os.PathLike | None = None, *, parallel: int | None = None,
        ray: str | None = None, force: bool = False, argv: list[str] | None = None,
        log: TextIO | None = None) -> SweepOutcome:
    """Run a plan's trials that are not done yet in ``out`` (default: a new temporary directory)."""
    if out is None:
        out = tempfile.mkdtemp(prefix=f"testbed-sweep-{plan_.sweep.name}-")
    return run_sweep(plan_, Path(out), parallel=parallel, ray_address=ray, force=force, argv=argv,
                     log=log or sys.stderr)


def table(out: str | os.PathLike) -> pd.DataFrame:
    """A sweep directory's statistics table, with ``attrs``: path, results (DataFrame)."""
    from testbed.analysis.sweep_tables import read_results, read_table

    out = Path(out)
    has_results = (out / "results.parquet").is_file() or (out / "results.csv").is_file()
    results = read_results(out) if has_results else None
    df = read_table(out, results)
    df.attrs["path"] = str(out.resolve())
    df.attrs["results"] = results
    return df


def sweep(path: str | os.PathLike, out: str | os.PathLike | None = None, *, parallel: int | None = None,
          ray: str | None = None, substrate: str | None = None, force: bool = False) -> pd.DataFrame:
    """Run the sweep file at ``path`` and return its statistics table (see the module's doc).

    Trials that failed are listed in ``attrs["failed"]``; when every trial failed there is no table
    and :class:`TestbedError` says so. Local trials run in fresh processes that, as Python's
    multiprocessing does, first import the calling script: a script calls this under
    ``if __name__ == "__main__":`` (a notebook needs nothing)."""
    return run_table(plan(path, substrate), out, where=str(path), parallel=parallel, ray=ray, force=force)


def run_table(plan_: SweepPlan, out: str | os.PathLike | None, *, where: str, parallel: int | None = None,
              ray: str | None = None, force: bool = False) -> pd.DataFrame:
    """Run ``plan_`` and return its statistics table, failed trials in ``attrs["failed"]``; every
    trial failed: a TestbedError naming ``where`` (the sweep file, or how Python's caller named it)."""
    outcome = run(plan_, out, parallel=parallel, ray=ray, force=force)
    df = table(outcome.out)
    df.attrs["failed"] = list(outcome.failed)
    if df.attrs["failed"] and df.empty:
        raise TestbedError(f"{where}: all {len(df.attrs['failed'])} trials failed (see {df.attrs['path']}/"
                           f"<trial>/trial.json){_unguarded_script_hint()}")
    return df


def _unguarded_script_hint() -> str:
    """Why trials of a sweep started from a script may all end at once: each trial process imports
    the script first and runs its top-level code, testbed.sweep included."""
    main = sys.modules.get("__main__")
    script = getattr(main, "__file__", None)
    if not script or getattr(main, "__spec__", None) is not None and main.__spec__.name.startswith("testbed"):
        return ""
    return (f"; each trial process imports {script} first: if it calls testbed.sweep at top level, "
            "put the call under `if __name__ == \"__main__\":`")
