"""``testbed bench emulation``: where an emulated run's control steps spend their wall time, and the
step path before issue #34 side by side with today's.

Each case is one ``testbed run`` of a scenario (default: the quick start) on a live substrate with
one kind of nodes (``agents``, ``ballast``), profiled by :mod:`testbed.step_profile`: every control
step of every policy split into command round trips to the agents, the clock running while
transfers are in flight, cap updates, reading back what the caps came to, fixed sleeps, policy,
power plan, accounting and recording, with the ratio of the steps' wall time to the sum of the
parts they must spend (all but sleeps). With agents, the step path runs both ways
(:mod:`testbed.power.throttle.agent_throttle`): ``poll``, the path before issue #34 (every job asked every
step, one after another, polling with sleeps until its cap shows enough step intervals; agents that
import torch at their first job) and ``event`` (only changes sent, one concurrent round trip per
step, no sleeps but bounded waits where a job would end unmeasured; agents that import torch while
the run starts), alternating ``repeat`` times, so that the
ratio of their wall times is measured on one machine under one load. Their outcomes (migrations,
decisions, energy) are written beside them: they must agree within the run-to-run spread.

Writes ``emulation.json`` (everything) and ``emulation.md`` (the tables) to the output directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

TARGET_WALL_S = 150.0  # issue #34: the quick start with agents on netns in <= 2.5 min on 2 cores
OUTCOME_KEYS = ("migrations", "migrations_completed", "total_kwh", "renewable_kwh", "grid_kwh", "jobs_completed",
                "work_done_gpu_h")


@dataclass(frozen=True)
class Case:
    """One run to profile: ``loaded`` (the scenario with its kind of nodes) on ``substrate`` with the
    agents' cap path in ``mode`` (``event`` or ``poll``; ballast has no cap path)."""

    substrate: str
    nodes: str
    mode: str
    loaded: object

    @property
    def name(self) -> str:
        return f"{self.substrate}/{self.nodes}/{self.mode}"


@contextlib.contextmanager
def cap_mode(mode: str) -> Iterator[None]:
    """The step path every run in the block gets: the agents' cap path
    (``testbed.power.throttle.agent_throttle.DEFAULT_MODE``) and, for ``poll`` (the path before), agents that
    do not import torch at start (``testbed.substrate.emulated.agent_mover.WARM_AGENTS``)."""
    from testbed.power.throttle import agent_throttle
    from testbed.substrate.emulated import agent_mover

    prev = agent_throttle.DEFAULT_MODE, agent_mover.WARM_AGENTS
    agent_throttle.DEFAULT_MODE, agent_mover.WARM_AGENTS = mode, mode != "poll"
    try:
        yield
    finally:
        agent_throttle.DEFAULT_MODE, agent_mover.WARM_AGENTS = prev


def outcomes(run_dir: Path) -> dict[str, dict]:
    """Per policy: the summary's outcome numbers and the decisions made (decisions.parquet rows)."""
    import pandas as pd

    out = {}
    for summary in sorted(run_dir.glob("*/summary.json")):
        s = json.loads(summary.read_text(encoding="utf-8"))
        row = {k: s.get(k) for k in OUTCOME_KEYS}
        dec = summary.parent / "decisions.parquet"
        row["decisions"] = len(pd.read_parquet(dec)) if dec.is_file() else None
        out[summary.parent.name] = row
    return out


def run_case(case: Case, *, plots: bool = True) -> dict:
    """One profiled ``testbed run`` of ``case``: its total wall time (as a user waits for it), each
    policy's, the steps' breakdown and the outcomes."""
    from testbed import step_profile
    from testbed.runner import run_scenario

    with tempfile.TemporaryDirectory(prefix="tb-bench-emulation-") as tmp, \
            _private_pace_cache(Path(tmp)), cap_mode(case.mode), step_profile.profiling() as prof:
        t0 = time.perf_counter()
        out = run_scenario(case.loaded, out_dir=Path(tmp) / "run", substrate=case.substrate, progress=False,
                           plots=plots)
        total = time.perf_counter() - t0
        manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
        got = outcomes(out)
        try:  # what each policy run recorded for the pace model (testbed/studies/pace.py)
            paced = json.loads((Path(tmp) / "pace.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            paced = {}
    live = [r for r in prof.runs if r.substrate == case.substrate]
    return {
        "case": case.name, "substrate": case.substrate, "nodes": case.nodes, "mode": case.mode,
        "total_wall_s": total, "policy_wall_s": manifest.get("wall_time_s", {}),
        "steps": step_profile.summarize(live),
        "per_policy": {r.label: step_profile.summarize([r]) for r in live},
        "outcomes": got, "pace_records": paced,
    }


@contextlib.contextmanager
def _private_pace_cache(tmp: Path) -> Iterator[None]:
    """The bench's runs record their pace in a cache of their own (poll-mode runs are not this
    machine's pace)."""
    from testbed.studies.pace import CACHE_ENV

    prev = os.environ.get(CACHE_ENV)
    os.environ[CACHE_ENV] = str(tmp / "pace.json")
    try:
        yield
    finally:
        if prev is None:
            os.environ.pop(CACHE_ENV, None)
        else:
            os.environ[CACHE_ENV] = prev


def _spread(values: list[float]) -> dict:
    vals = [float(v) for v in values if v is not None]
    if not vals:
        return {"n": 0}
    return {"n": len(vals), "mean": statistics.fmean(vals), "min": min(vals), "max": max(vals)}


def compare_modes(results: list[dict]) -> list[dict]:
    """Per substrate with agents run in both modes: the wall-time ratio poll / event (medians over
    the repeats) and each outcome's range per mode, per policy."""
    rows = []
    for sub in sorted({r["substrate"] for r in results if r["nodes"] == "agents"}):
        by = {m: [r for r in results if r["substrate"] == sub and r["nodes"] == "agents" and r["mode"] == m]
              for m in ("poll", "event")}
        if not by["poll"] or not by["event"]:
            continue
        poll_s = statistics.median(r["total_wall_s"] for r in by["poll"])
        event_s = statistics.median(r["total_wall_s"] for r in by["event"])
        policies = sorted({p for r in by["poll"] + by["event"] for p in r["outcomes"]})
        outcome = {p: {k: {m: _spread([r["outcomes"].get(p, {}).get(k) for r in by[m]]) for m in by}
                       for k in (*OUTCOME_KEYS, "decisions")} for p in policies}
        rows.append({"substrate": sub, "poll_wall_s": poll_s, "event_wall_s": event_s,
                     "speedup": poll_s / event_s if event_s > 0 else None,
                     "event_within_target": event_s <= TARGET_WALL_S, "outcomes": outcome})
    return rows


def run(out: Path, cases: list[Case], *, repeat: int = 1, plots: bool = True, scenario: str = "",
        say=print) -> dict:
    """Every case ``repeat`` times, the cases alternating (poll beside event under the same load);
    ``emulation.json`` and ``emulation.md`` written to ``out``."""
    host = host_facts()
    results = []
    for i in range(repeat):
        for case in cases:
            say(f"bench emulation: {case.name} (round {i + 1}/{repeat}) ...")
            r = run_case(case, plots=plots)
            r["round"] = i + 1
            say(f"  {r['total_wall_s']:.1f} s; {r['steps']['wall_per_step_ms']:.1f} ms a step, "
                f"{r['steps']['round_trips_per_step']:.2f} round trips a step")
            results.append(r)
    result = {"bench": "emulation", "scenario": scenario, "repeat": repeat,
              "host": {**host, "loadavg_at_end": list(os.getloadavg())},
              "target_wall_s": TARGET_WALL_S, "runs": results, "modes": compare_modes(results)}
    out.mkdir(parents=True, exist_ok=True)
    (out / "emulation.json").write_text(json.dumps(result, indent=2, sort_keys=True, default=str) + "\n",
                                        encoding="utf-8")
    (out / "emulation.md").write_text(markdown(result), encoding="utf-8")
    return result


def host_facts() -> dict:
    """The machine the bench ran on: cores, kernel, and its load when the bench began and ended."""
    import platform

    return {"cores": os.cpu_count(), "kernel": platform.release(), "python": platform.python_version(),
            "loadavg_1_5_15": list(os.getloadavg())}


def _ms(x) -> str:
    return "" if x is None else f"{x:.1f}"


def markdown(result: dict) -> str:
    from testbed.step_profile import PARTS

    lines = [f"# bench emulation: {result['scenario']}", "",
             f"Host: {result['host']['cores']} cores, kernel {result['host']['kernel']}, load average "
             f"{'/'.join(f'{x:.1f}' for x in result['host']['loadavg_1_5_15'])} at the start, "
             f"{'/'.join(f'{x:.1f}' for x in result['host']['loadavg_at_end'])} at the end", "",
             "Each control step split into its parts (ms per step, exclusive; `other` is the step's wall time outside "
             "every part); `wall/work` is the steps' wall time over the parts they must spend (all but sleeps).", "",
             "| case | round | run wall s | steps | ms/step | " + " | ".join(PARTS) + " | other | round trips/step "
             "| steps w/o round trip | wall/work |",
             "|---|---:|---:|---:|---:|" + "---:|" * len(PARTS) + "---:|---:|---:|---:|"]
    for r in result["runs"]:
        s = r["steps"]
        per = s.get("per_step_ms", {})
        lines.append(f"| {r['case']} | {r['round']} | {r['total_wall_s']:.1f} | {s['steps']} | {_ms(s['wall_per_step_ms'])} | "
                     + " | ".join(_ms(per.get(p)) for p in PARTS) + f" | {_ms(per.get('other'))} | "
                     f"{s['round_trips_per_step']:.2f} | {s['steps_without_round_trip']} | "
                     f"{'' if s['wall_over_work'] is None else format(s['wall_over_work'], '.2f')} |")
    for m in result["modes"]:
        lines += ["", f"## {m['substrate']} with agents: the path before (poll) beside today's (event)", "",
                  f"Run wall time (median over rounds): poll {m['poll_wall_s']:.1f} s, event {m['event_wall_s']:.1f} s: "
                  f"x {m['speedup']:.2f} faster; target <= {result['target_wall_s']:.0f} s: "
                  f"{'met' if m['event_within_target'] else 'NOT met'}", "",
                  "Outcomes per policy (mean over rounds, [min, max] where more than one):", "",
                  "| policy | outcome | poll | event |", "|---|---|---:|---:|"]
        for pol, by_key in m["outcomes"].items():
            for key, by_mode in by_key.items():
                lines.append(f"| {pol} | {key} | {_fmt_spread(by_mode['poll'])} | {_fmt_spread(by_mode['event'])} |")
    return "\n".join(lines) + "\n"


def _fmt_spread(s: dict) -> str:
    if not s.get("n"):
        return ""
    if s["n"] == 1 or s["min"] == s["max"]:
        return f"{s['mean']:.4g}"
    return f"{s['mean']:.4g} [{s['min']:.4g}, {s['max']:.4g}]"
