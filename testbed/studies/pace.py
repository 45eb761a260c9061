"""The measured pace of an emulation's control loop, so the next estimate of wall time includes it.

On a live substrate every control step costs wall time beyond the transfers (agents asked for their
jobs' state, caps applied, link rates replayed, the clock advanced); on a busy small machine that
dominates a short scenario (the quick start with agents: ~0.16 s a step, 8 min for four policies,
while its transfers take ~20 s). Each emulated policy run of the migration study records its wall
seconds per control step outside transfers, per substrate and kind of nodes, in a small cache
(``/var/cache/testbed/emulation-pace.json`` as root, else ``~/.cache/testbed/emulation-pace.json``;
``$TESTBED_PACE_CACHE`` overrides). :mod:`testbed.studies.wall_time` reads it; where nothing was
measured yet the estimate says so. The cache is advisory: a file that cannot be read or written is
ignored.
"""

from __future__ import annotations

import json
import os
import statistics
from datetime import datetime, timezone
from pathlib import Path

CACHE_ENV = "TESTBED_PACE_CACHE"
KEEP = 5  # the last runs kept per (substrate, nodes); the estimate uses their median


def cache_path() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    if os.geteuid() == 0:
        return Path("/var/cache/testbed/emulation-pace.json")
    return Path.home() / ".cache" / "testbed" / "emulation-pace.json"


def _key(substrate: str, nodes: str) -> str:
    return f"{substrate}/{nodes}"


def _read() -> dict:
    try:
        data = json.loads(cache_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def record(substrate: str, nodes: str, *, steps: int, wall_s: float, transfer_wall_s: float) -> float | None:
    """Record one emulated policy run: its wall seconds per step outside transfers. Returns that
    pace, or None when there is nothing to learn (no steps) or the cache cannot be written."""
    if steps <= 0 or not wall_s > 0:
        return None
    step_s = max(0.0, wall_s - max(0.0, transfer_wall_s)) / steps
    data = _read()
    runs = [r for r in data.get(_key(substrate, nodes), []) if isinstance(r, dict)][-(KEEP - 1):]
    runs.append({"step_wall_s": step_s, "steps": int(steps), "at": datetime.now(timezone.utc).isoformat()})
    data[_key(substrate, nodes)] = runs
    path = cache_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        return None
    return step_s


def step_wall_s(substrate: str, nodes: str) -> tuple[float, int] | None:
    """Median measured wall seconds per control step for this substrate and kind of nodes, and how
    many runs it is from; None if none was measured here."""
    vals = []
    for r in _read().get(_key(substrate, nodes), []):
        v = r.get("step_wall_s") if isinstance(r, dict) else None
        if isinstance(v, (int, float)) and v >= 0:
            vals.append(float(v))
    return (statistics.median(vals), len(vals)) if vals else None
