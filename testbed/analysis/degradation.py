"""Which migrations ran over a degraded link, decided per migration from the run's own scenario.

A sweep may carry degradation under any parameter name (``$deg`` set into
``traces.bandwidth.steady_degradation_pct`` or into degradation events), and a scenario may hold
events without any sweep at all, so the parameter names say little. The resolved scenario in each
run's ``manifest.json`` says exactly what the link did: a migration is *degraded* when the run has
a steady degradation above 0 %, or a degradation event above 0 % on its link (``a-b`` either order,
or ``*``) overlaps its interval ``[t_decision, t_decision + actual total]`` (to the end of the run
when it never finished). A ``degraded`` column already in ``migrations.parquet`` (a recorder that
measured the link) is honoured as well. Runs whose manifest has no resolved scenario fall back to
their swept parameters: any ``param_`` column whose name mentions ``deg`` and is non-zero.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from testbed.analysis.names import PARAM_PREFIX
from testbed.analysis.outcomes import outcome_s

KIND_NONE, KIND_STEADY, KIND_EVENT, KIND_SWEPT, KIND_MEASURED = "none", "steady", "event", "swept", "measured"


def _bandwidth_spec(resolved: dict) -> dict | None:
    traces = resolved.get("traces") if isinstance(resolved, dict) else None
    bw = traces.get("bandwidth") if isinstance(traces, dict) else None
    return bw if isinstance(bw, dict) else None


def link_degradation(bw: dict, src: str, dst: str, t0_s: float, t1_s: float) -> tuple[float, str]:
    """(largest degradation % the link ``src``-``dst`` had during ``[t0_s, t1_s]``, its kind)."""
    steady = float(bw.get("steady_degradation_pct") or 0.0)
    worst, kind = (steady, KIND_STEADY) if steady > 0 else (0.0, KIND_NONE)
    for e in bw.get("events") or []:
        pct = float(e.get("degradation_pct") or 0.0)
        if pct <= 0 or e.get("link") not in ("*", f"{src}-{dst}", f"{dst}-{src}"):
            continue
        start = float(e["start_h"]) * 3600.0
        end = start + float(e["duration_h"]) * 3600.0
        if start < t1_s and end > t0_s and pct > worst:
            worst, kind = pct, KIND_EVENT
    return worst, kind


def nominal_rate_gbps(resolved: dict, src: str, dst: str) -> float:
    """The link's nominal rate from ``src`` to ``dst`` in the resolved scenario (NaN if unknown)."""
    for link in resolved.get("links") or [] if isinstance(resolved, dict) else []:
        a, b = link.get("a"), link.get("b")
        if (a, b) == (src, dst):
            return float(link.get("bandwidth_gbps") or math.nan)
        if (a, b) == (dst, src):
            back = link.get("bandwidth_b_to_a_gbps")
            return float(back if back is not None else link.get("bandwidth_gbps") or math.nan)
    return math.nan


def mark(m: pd.DataFrame, resolved: dict) -> pd.DataFrame:
    """``m`` (one run's migrations, with its ``param_`` columns) with ``degradation_pct``,
    ``degradation_kind``, ``degraded`` and ``nominal_bandwidth_gbps`` added."""
    m = m.copy()
    bw = _bandwidth_spec(resolved)
    t0 = m["t_decision_s"].astype(float).to_numpy()
    total = outcome_s(m, "total").to_numpy(float)  # measured, or modelled on sim (records.outcome_s)
    t1 = np.where(np.isfinite(total), t0 + np.nan_to_num(total), math.inf)
    if bw is not None:
        found = [link_degradation(bw, s, d, a, b) for s, d, a, b in zip(m["src"], m["dst"], t0, t1)]
        pct = np.array([f[0] for f in found], dtype=float)
        kind = np.array([f[1] for f in found], dtype=object)
    else:
        swept = [c for c in m.columns if c.startswith(PARAM_PREFIX) and "deg" in c.lower()]
        pct = np.zeros(len(m))
        for c in swept:
            pct = np.maximum(pct, pd.to_numeric(m[c], errors="coerce").fillna(0.0).to_numpy(float))
        kind = np.where(pct > 0, KIND_SWEPT, KIND_NONE).astype(object)
    degraded = pct > 0
    if "degraded" in m.columns:  # recorded per migration: either source flags it
        recorded = m["degraded"].fillna(False).astype(bool).to_numpy()
        kind = np.where(recorded & ~degraded, KIND_MEASURED, kind).astype(object)
        degraded = degraded | recorded
    m["degradation_pct"] = pct
    m["degradation_kind"] = kind
    m["degraded"] = degraded
    m["nominal_bandwidth_gbps"] = [nominal_rate_gbps(resolved, s, d) for s, d in zip(m["src"], m["dst"])]
    return m
