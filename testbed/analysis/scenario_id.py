"""What a run is as an experiment: its resolved scenario without the seed, and a stable hash of it.

``testbed report`` pools runs as seeds of one setting only when they ran the same experiment: the
same resolved scenario (``manifest.json``'s ``scenario.resolved``: the file after ``--set`` and sweep
overrides) apart from the fields that differ from seed to seed by design. Between the seeds of one
sweep cell, and between ``testbed run --seed N`` runs of one file (other ``--out``, other working
directory), only ``seed`` differs: nothing else is removed. Output paths are not in the resolved
scenario; input file paths are (made absolute by the loader), and stay: they name what was read.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

PER_RUN_FIELDS = ("seed",)  # resolved-scenario fields that differ between the seeds of one setting


def experiment(resolved: dict) -> dict:
    """The resolved scenario without its per-run fields."""
    return {k: v for k, v in (resolved or {}).items() if k not in PER_RUN_FIELDS}


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def scenario_hash(resolved: dict) -> str:
    """sha256 (first 16 hex digits) of the canonical JSON (sorted keys) of ``experiment(resolved)``;
    ``""`` when no resolved scenario is recorded (nothing to identify the run by)."""
    if not isinstance(resolved, dict) or not resolved:
        return ""
    return hashlib.sha256(_canonical(experiment(resolved)).encode()).hexdigest()[:16]


_PLAIN_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_+-]{0,63}")


def _key(k: str) -> str:
    """A key as shown in a field path: as it is if it is a plain name, else ``?`` (never echo odd text)."""
    return k if _PLAIN_KEY.fullmatch(k) else "?"


def first_difference(a: Any, b: Any, path: str = "") -> str | None:
    """The dotted path (``duration_h``, ``policies[2].alpha``) of the first field, in sorted key order,
    whose value differs between ``a`` and ``b`` (compared as the hash compares them, by their JSON);
    the path of the list for lists of different lengths; None if none differs."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            sub = f"{path}.{_key(str(k))}" if path else _key(str(k))
            if k not in a or k not in b:
                return sub
            found = first_difference(a[k], b[k], sub)
            if found is not None:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b)):
            found = first_difference(x, y, f"{path}[{i}]")
            if found is not None:
                return found
        return None if len(a) == len(b) else (path or "(top level)")
    return None if _canonical(a) == _canonical(b) else (path or "(top level)")
