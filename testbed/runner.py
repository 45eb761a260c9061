"""``testbed run``: one scenario, every policy on identical inputs, one results directory.

The scenario's study (:mod:`testbed.studies`: migration or federated) runs and compares the
policies; this runner owns the results directory (checked, written atomically, its partial
directory listed under the run id of live runs), ``traces.parquet``, ``scenario.yaml`` and
``manifest.json``.
"""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path

import pandas as pd

from testbed.errors import SpecError
from testbed.html import INDEX
from testbed.html.live import live_page
from testbed.html.writer import write_run_page
from testbed.inputs import build_inputs
from testbed.netem.owned import state
from testbed.netem.owned.naming import check_run_id, new_run_id
from testbed.recorder.manifest import ORIGINAL_COPY, build_manifest
from testbed.recorder.out_dir import default_out_dir
from testbed.recorder.tables import tidy_traces
from testbed.recorder.writer import atomic_dir, check_out_dir, partial_dir, write_json, write_table
from testbed.spec.load import LoadedScenario
from testbed.studies import Study, study_for
from testbed.substrate import unknown_substrate
from testbed.substrate.registry import choose_substrate


def _wall_time(loaded: LoadedScenario, inputs, substrate: str, say: bool) -> float:
    """Before an emulation starts: its estimated wall time (for the live page), said with a warning
    naming ``emulation.time_scale`` when it is long where ``say`` (testbed/studies/wall_time.py)."""
    from testbed.studies.wall_time import estimate

    est = estimate(loaded, inputs, substrate)
    if say:
        print(est.line(), file=sys.stderr)
        if est.warning():
            print(est.warning(), file=sys.stderr)
    return est.seconds


def traces_table(study: Study, start) -> pd.DataFrame:
    """Every input trace the study used, long: one row per sample with ``t_s``, UTC ``time``, ``site`` or
    ``link``, ``quantity``, ``unit`` and ``value`` (testbed.recorder.tables.tidy_traces)."""
    return tidy_traces([(name, tr.to_frame()) for name, tr in study.traces()], start)


def run_scenario(loaded: LoadedScenario, *, out_dir: Path | None = None, substrate: str = "sim",
                 seed: int | None = None, progress: bool = True, force: bool = False,
                 argv: list[str] | None = None, plots: bool = True, original: dict | None = None,
                 run_id: str | None = None) -> Path:
    """``plots=False`` skips the figures (sweeps: most of a short trial's time is matplotlib).
    ``original``: the scenario file as written (``text``, ``sha256``, ``overrides``) when ``loaded`` is
    that file with overrides applied: kept beside ``scenario.yaml`` (what ran) with its hash.
    ``run_id``: an emulation's run id, when the caller has already listed something under it (a sweep
    trial's CPU share, :mod:`testbed.sweep.share`); default a new one."""
    sc = loaded.scenario
    substrate, why = choose_substrate(substrate, sc)
    problem = unknown_substrate(substrate)
    if problem is not None:
        raise SpecError([("--substrate", problem)])
    print(f"substrate: {substrate} ({why})", file=sys.stderr)
    study = study_for(loaded, substrate=substrate, progress=progress, plots=plots)
    study.validate()
    inputs = build_inputs(sc, seed)
    study.check(inputs)
    out_dir = out_dir or default_out_dir(sc.name, inputs.seed)
    checked = check_out_dir(out_dir, force, protect=(loaded.path,))
    # emulation: one run id names every live resource, listed in its state file before it exists
    # (the partial results directory included) so that `testbed clean` finds them after a crash
    given, run_id, estimate_s = run_id, None, None
    if study.live(inputs):
        from testbed.netem.fabric import require_root

        require_root(f"--substrate {substrate}")  # before the state file (root's /run/testbed) is written
        run_id = check_run_id(given) if given else new_run_id()
        if given is None:  # a sweep names its trials' ids itself
            print(f"run id {run_id}: every live resource carries it; if this process is killed, "
                  f"`testbed clean --run {run_id}` removes what is left", file=sys.stderr)
        estimate_s = _wall_time(loaded, inputs, substrate, say=progress)
    summaries: dict[str, dict] = {}
    wall: dict[str, float] = {}
    with contextlib.ExitStack() as stack, state.listed(run_id, partial_dirs=[str(partial_dir(checked.path))]), \
            atomic_dir(out_dir, force, protect=(loaded.path,)) as tmp:
        runs = study.start(inputs, run_id, stack)
        # an emulation's index.html is rewritten every few seconds while it runs (testbed/html/live.py)
        if run_id is not None and progress:
            print(f"live page: {tmp / INDEX} (then {Path(out_dir) / INDEX})", file=sys.stderr)
        with live_page(run_id is not None, tmp / INDEX, f"Run: {sc.name}", [r.label for r in runs],
                       estimate_s=estimate_s, progress=study.progress_state, final_path=Path(out_dir) / INDEX) as live:
            for run in runs:
                live.started(run.label)
                t_start = time.perf_counter()
                record = study.run(run)
                wall[run.label] = time.perf_counter() - t_start
                folder = tmp / run.label
                folder.mkdir()
                summaries[run.label] = study.summarize(run, record, wall[run.label], folder)
                live.finished(run.label, summaries[run.label], wall[run.label])
            live.event("comparing the policies")
        t_finish = time.perf_counter()
        cmp, markdown = study.compare(summaries, tmp)
        write_json(tmp / "comparison.json", cmp)
        (tmp / "comparison.md").write_text(markdown, encoding="utf-8")
        write_table(tmp / "traces.parquet", traces_table(study, inputs.scenario.start))
        (tmp / "scenario.yaml").write_text(loaded.text, encoding="utf-8")
        kept = None
        if original is not None:
            (tmp / ORIGINAL_COPY).write_text(original["text"], encoding="utf-8")
            kept = {"copy": ORIGINAL_COPY, "sha256": original["sha256"], "overrides": original.get("overrides") or {}}
        write_json(tmp / "manifest.json", build_manifest(
            scenario_sha256=loaded.sha256, scenario_path=str(loaded.path),
            scenario_resolved=inputs.scenario.model_dump(mode="json"), seed=inputs.seed, substrate=study.describe(),
            policies=[p.model_dump(mode="json") for p in sc.policies], wall_s=wall, argv=argv or [],
            topology_path=loaded.topology_path, original=kept))
        write_run_page(tmp, plots=plots)  # index.html: the results as one page (the last file written)
    if run_id is not None:  # the comparison, report and page after the policies: for the next estimate
        from testbed.studies import pace

        pace.record_finish(substrate, sc.emulation.nodes, time.perf_counter() - t_finish)
    return out_dir
