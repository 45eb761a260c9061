"""Fit a scenario's listed events and jobs to its run: what starts at or after the end is dropped.

A ``duration_h`` overridden shorter (``--set duration_h=12``, an override from Python, a sweep's
grid) leaves bandwidth events and listed jobs that would begin after the run ends. They cannot
happen, so they are dropped and one :class:`~testbed.errors.TestbedWarning` line says how many
(:func:`testbed.spec.load.scenario_from_dict`). A scenario file as written is not trimmed: there,
each is an error naming it. This works on the raw data, before validation, so that a caller can
save the scenario that runs. Values of the wrong type are left alone for validation to report.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

from testbed.errors import TestbedWarning


def _hours(x: object) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        return None
    return float(x)


def _after(entry: object, key: str, end_h: float, default: float | None = None) -> bool:
    """Does ``entry`` (a mapping) begin at or after ``end_h``?"""
    if not isinstance(entry, dict):
        return False
    t = _hours(entry.get(key, default))
    return t is not None and t >= end_h


def trim_to_run(data: Any) -> tuple[Any, str | None]:
    """``(data, note)``: ``data`` without the bandwidth events (``start_h``) and listed jobs
    (``arrival_h``) that begin at or after ``duration_h``, and a one-line note saying what was
    dropped (None: nothing was). ``data`` itself is never changed: a trimmed copy is returned.
    Listed jobs are kept when dropping them would leave the run without any job (no ``arrivals``):
    validation then says which job arrives too late."""
    if not isinstance(data, dict):
        return data, None
    end_h = _hours(data.get("duration_h"))
    if end_h is None or end_h <= 0:
        return data, None
    out = data
    dropped: list[str] = []
    traces = data.get("traces")
    bandwidth = traces.get("bandwidth") if isinstance(traces, dict) else None
    events = bandwidth.get("events") if isinstance(bandwidth, dict) else None
    if isinstance(events, list):
        kept = [e for e in events if not _after(e, "start_h", end_h)]
        if len(kept) < len(events):
            n = len(events) - len(kept)
            dropped.append(f"{n} bandwidth event{'s' if n != 1 else ''} (traces.bandwidth.events)")
            out = {**out, "traces": {**traces, "bandwidth": {**bandwidth, "events": kept}}}
    workloads = data.get("workloads")
    jobs = workloads.get("jobs") if isinstance(workloads, dict) else None
    if isinstance(jobs, list):
        kept = [j for j in jobs if not _after(j, "arrival_h", end_h, 0.0)]
        if len(kept) < len(jobs) and (kept or workloads.get("arrivals") is not None):
            n = len(jobs) - len(kept)
            dropped.append(f"{n} job{'s' if n != 1 else ''} (workloads.jobs)")
            out = {**out, "workloads": {**workloads, "jobs": kept}}
    if not dropped:
        return data, None
    return out, (f"duration_h {end_h:g}: dropped {' and '.join(dropped)} beginning at or after the end of the run")


def warn_trimmed(note: str | None, stacklevel: int = 2) -> None:
    """Say what :func:`trim_to_run` dropped (nothing when ``note`` is None)."""
    if note is not None:
        warnings.warn(note, TestbedWarning, stacklevel=stacklevel + 1)
