"""The measured pace of an emulation's control loop, so the next estimate of wall time includes it.

On a live substrate every control step costs wall time beyond the transfers (agents asked for their
jobs' state, caps applied, link rates replayed, the clock advanced); on a busy small machine that
dominates a short scenario (the quick start with agents: ~0.2 s a step, 8.6 min for four policies,
on the step path before issue #34; ~0.03 s a step and about 1.5 min on today's, whose steps make a
round trip only when something changes; its transfers take ~20 s). A policy run also costs a fixed time (the fabric and its nodes
brought up and down) and the writing of its results (tables, figures). Each emulated policy run of
the migration study records these three, per substrate and kind of nodes, in a small cache
(``/var/cache/testbed/emulation-pace.json`` as root, else ``~/.cache/testbed/emulation-pace.json``;
``$TESTBED_PACE_CACHE`` overrides). :func:`expected` gives :mod:`testbed.studies.wall_time` the median
of this machine's last runs, or, before the first one, the default shipped with the code
(``testbed/data/emulation-pace.json``: measured on a 2-core machine, with its provenance). The cache is
advisory: a file that cannot be read or written is ignored. Runs that update it at once take turns (a
lock on ``<cache>.lock``), and a sweep's trial run beside others (``--parallel``) records nothing
(``$TESTBED_PACE_NO_RECORD``): its steps share the CPUs, and a single run's estimate would grow.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import statistics
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

CACHE_ENV = "TESTBED_PACE_CACHE"
NO_RECORD_ENV = "TESTBED_PACE_NO_RECORD"  # set (non-empty): record() and record_finish() write nothing
KEEP = 5  # the last runs kept per (substrate, nodes); the estimate uses their median
SHIPPED = Path(__file__).resolve().parents[1] / "data" / "emulation-pace.json"
FINISH = "/finish"  # key suffix: what a run takes after its last policy
# A run of fewer control steps says little about a step's cost (its loop is mostly start-up and the first
# exchanges: a 24-step run here measured 0.0003 s a step against 0.17 s in a full one): it shapes the
# estimate only when no longer run has been measured and nothing is shipped.
MIN_STEPS = 100


def cache_path() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    if os.geteuid() == 0:
        return Path("/var/cache/testbed/emulation-pace.json")
    return Path.home() / ".cache" / "testbed" / "emulation-pace.json"


def _key(substrate: str, nodes: str) -> str:
    return f"{substrate}/{nodes}"


def recording() -> bool:
    """False where this process's runs must not update the cache (``$TESTBED_PACE_NO_RECORD``)."""
    return not os.environ.get(NO_RECORD_ENV, "").strip()


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    """The block holds ``<cache>.lock`` (other testbed processes updating the cache wait); without a
    lock file to open the block runs unlocked (the cache is advisory)."""
    path = cache_path()
    fd = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
    except OSError:
        pass
    try:
        yield
    finally:
        if fd is not None:
            os.close(fd)  # releases the lock


def _read() -> dict:
    try:
        data = json.loads(cache_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def job_steps(jobs, end_s: float, step_s: float) -> int:
    """Control steps x jobs running in them, from a run's ``jobs`` table (``started_s``, ``finished_s``;
    a job still running at the end counts to ``end_s``): what a step with node agents costs grows with."""
    import math

    total = 0
    for start, finish in zip(jobs.get("started_s", []), jobs.get("finished_s", [])):
        if start is None or not math.isfinite(float(start)):
            continue
        finish = end_s if finish is None or not math.isfinite(float(finish)) else float(finish)
        total += max(0, math.ceil((finish - float(start)) / step_s))
    return total


def record(substrate: str, nodes: str, *, steps: int, wall_s: float, transfer_wall_s: float,
           fixed_wall_s: float = 0.0, results_wall_s: float | None = None, jobs_steps: int | None = None) -> float | None:
    """Record one emulated policy run: its wall seconds per step outside transfers and the fixed part
    (``fixed_wall_s``: bringing the fabric and nodes up and down, outside the steps), the seconds its
    results took to write and its ``jobs_steps`` (:func:`job_steps`), which :func:`expected` scales
    the shipped model by. Returns the step's pace, or None when there is nothing to learn (no steps) or the
    cache cannot be written."""
    if steps <= 0 or not wall_s > 0 or not recording():
        return None
    fixed_wall_s = min(max(0.0, fixed_wall_s), wall_s)
    loop_s = max(0.0, wall_s - fixed_wall_s - max(0.0, transfer_wall_s))
    step_s = loop_s / steps
    run = {"step_wall_s": step_s, "steps": int(steps), "fixed_wall_s": fixed_wall_s,
           "at": datetime.now(timezone.utc).isoformat()}
    if jobs_steps is not None:
        run["job_steps"] = int(jobs_steps)
    if results_wall_s is not None:
        run["results_wall_s"] = max(0.0, results_wall_s)
    with _locked():
        data = _read()
        runs = [r for r in data.get(_key(substrate, nodes), []) if isinstance(r, dict)][-(KEEP - 1):]
        runs.append(run)
        data[_key(substrate, nodes)] = runs
        return step_s if _write(data) else None


def _write(data: dict) -> bool:
    path = cache_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        return False
    return True


def record_finish(substrate: str, nodes: str, finish_wall_s: float) -> None:
    """Record the seconds an emulated run took after its last policy (comparison, report, page)."""
    if not recording():
        return
    with _locked():
        data = _read()
        key = _key(substrate, nodes) + FINISH
        data[key] = ([r for r in data.get(key, []) if isinstance(r, dict)][-(KEEP - 1):]
                     + [{"finish_wall_s": max(0.0, finish_wall_s), "at": datetime.now(timezone.utc).isoformat()}])
        _write(data)


@dataclass(frozen=True)
class Pace:
    """What one policy run costs beyond its transfers: ``step_s`` per control step, ``fixed_s`` once
    (fabric and nodes up and down), ``results_s`` to write its results; from ``runs`` runs of this
    machine, or (``runs == 0``) the shipped default, ``source`` says which."""

    step_s: float
    fixed_s: float
    results_s: float
    runs: int
    source: str
    finish_s: float = 0.0  # once per run, after the last policy: comparison, report, page
    job_step_s: float | None = None  # per step and job running in it, on top of step_s (the shipped model's)

    def loop_s(self, steps: int, jobs_steps: int | None) -> float:
        """The control loop's seconds for ``steps`` steps with ``jobs_steps`` running job-steps."""
        return steps * self.step_s + (jobs_steps or 0) * (self.job_step_s or 0.0)


def _median(runs: list, key: str) -> float | None:
    vals = [float(r[key]) for r in runs if isinstance(r, dict) and isinstance(r.get(key), (int, float)) and r[key] >= 0]
    return statistics.median(vals) if vals else None


def _shipped(substrate: str, nodes: str) -> dict | None:
    try:
        data = json.loads(SHIPPED.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    entry = data.get("pace", {}).get(_key(substrate, nodes)) if isinstance(data, dict) else None
    return {**entry, "measured_on": data.get("measured_on", "")} if isinstance(entry, dict) else None


def expected(substrate: str, nodes: str) -> Pace | None:
    """This machine's pace for a policy run on ``substrate`` with ``nodes``, else the shipped default,
    else None. The shipped model splits the control loop between steps and job-steps; this machine's
    runs scale it (measured / modelled loop time, summed over its last runs of at least
    :data:`MIN_STEPS` steps), so one run on a new machine is enough; a part its runs did not record comes from the shipped default."""
    data = _read()
    shipped = _shipped(substrate, nodes) or {}
    runs = _telling(data.get(_key(substrate, nodes), []), shipped=bool(shipped))
    finish = _median([r for r in data.get(_key(substrate, nodes) + FINISH, []) if isinstance(r, dict)], "finish_wall_s")
    finish = finish if finish is not None else float(shipped.get("finish_wall_s", 0.0))
    step = _median(runs, "step_wall_s")
    if step is not None:
        fixed = _median(runs, "fixed_wall_s")
        results = _median(runs, "results_wall_s")
        fixed = fixed if fixed is not None else float(shipped.get("fixed_wall_s", 0.0))
        results = results if results is not None else float(shipped.get("results_wall_s", 0.0))
        where = f"measured by the last {len(runs)} {substrate} run{'s' if len(runs) != 1 else ''} with {nodes} nodes here"
        scale = _scale(runs, shipped)
        if scale is None:
            return Pace(step, fixed, results, len(runs), where, finish)
        return Pace(scale * float(shipped["step_wall_s"]), fixed, results, len(runs),
                    f"the shipped model scaled x {scale:.2f} by the last {len(runs)} {substrate} "
                    f"run{'s' if len(runs) != 1 else ''} with {nodes} nodes here", finish,
                    scale * float(shipped["job_step_wall_s"]))
    if not shipped:
        return None
    return Pace(float(shipped["step_wall_s"]), float(shipped.get("fixed_wall_s", 0.0)),
                float(shipped.get("results_wall_s", 0.0)), 0,
                f"the default shipped for {substrate} with {nodes} nodes ({shipped['measured_on']}); "
                "this machine's first run replaces it", finish,
                float(shipped["job_step_wall_s"]) if "job_step_wall_s" in shipped else None)


def _telling(records: list, *, shipped: bool) -> list[dict]:
    """The recorded runs that say something about a step's cost: those of at least :data:`MIN_STEPS`
    steps; when there are none, the short ones only if nothing is shipped to fall back on."""
    runs = [r for r in records if isinstance(r, dict)]
    long = [r for r in runs if isinstance(r.get("steps"), (int, float)) and r["steps"] >= MIN_STEPS]
    return long if long or shipped else runs


def _scale(runs: list[dict], shipped: dict) -> float | None:
    """(Measured loop time) / (the shipped model's loop time), summed over the runs that recorded their
    job-steps: each run weighs by its size, so a long run outweighs a short one."""
    if "job_step_wall_s" not in shipped:
        return None
    measured = modelled = 0.0
    for r in runs:
        steps, jobs_steps, step_s = r.get("steps"), r.get("job_steps"), r.get("step_wall_s")
        if not all(isinstance(x, (int, float)) for x in (steps, jobs_steps, step_s)):
            continue
        measured += step_s * steps
        modelled += steps * float(shipped["step_wall_s"]) + jobs_steps * float(shipped["job_step_wall_s"])
    return measured / modelled if modelled > 0 else None


def step_wall_s(substrate: str, nodes: str) -> tuple[float, int] | None:
    """Median measured wall seconds per control step for this substrate and kind of nodes, and how
    many runs it is from; None if none was measured here."""
    runs = _telling(_read().get(_key(substrate, nodes), []), shipped=False)
    step = _median(runs, "step_wall_s")
    return (step, len(runs)) if step is not None else None
