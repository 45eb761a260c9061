"""The PowerTrip paper's claims judged over seeds: ``testbed report`` on federated runs and sweeps.

Each federated run's ``comparison.json`` holds, per round-time clock, PowerTrip's time-to-accuracy
reduction against each baseline (testbed.analysis.federated_summary.claims). Runs are grouped by
scenario, substrate and sweep cell (one group = one setting, its seeds). Per group, clock and
claim: the per-seed reductions, their mean and 95 % Student-t CI, and a verdict.

- **reproduced**: at least ``MIN_SEEDS`` seeds where both PowerTrip and the baseline reached the
  target, and the paper's number lies in the CI (which excludes 0);
- **inconclusive**: the CI holds both the paper's number and 0;
- **same direction, weaker/stronger**: the CI excludes 0 on the paper's side but misses its number;
- **not reproduced**: the CI contains 0 (no significant reduction), or lies on the other side;
- **not enough seeds**: fewer seeds where both reached the target.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from testbed.analysis.compare import MIN_SEEDS
from testbed.analysis.federated_summary import PAPER
from testbed.analysis.markdown import md_table
from testbed.stats import t_interval

PAPER_VS_BEST_STATIC_PCT = 100.0 * (1.0 - PAPER["powertrip_h"] / PAPER["static_best_h"])  # 0.65 h vs 1.16 h: 44 %
CLAIMS = (
    ("max_reduction_pct", "PowerTrip: up to 50 % lower time-to-accuracy than the baselines", PAPER["max_reduction_pct"]),
    ("reduction_vs_best_static_pct", "PowerTrip vs the best static k (post hoc)", PAPER_VS_BEST_STATIC_PCT),
    ("reduction_vs_static_k70_pct", "PowerTrip vs static k = 70 (the paper's best)", PAPER_VS_BEST_STATIC_PCT),
)


def is_federated(run) -> bool:
    return bool((run.resolved or {}).get("federated"))


def _verdict(values: np.ndarray, paper: float) -> str:
    iv = t_interval(values)
    if iv is None or iv.n < MIN_SEEDS:
        return f"not enough seeds (n={0 if iv is None else iv.n}<{MIN_SEEDS} where both reached the target)"
    if iv.lo <= paper <= iv.hi:
        if iv.lo <= 0 <= iv.hi:
            return "inconclusive (the CI holds both the paper's number and 0)"
        return "reproduced"
    if iv.lo > 0 or iv.hi < 0:
        if (iv.mean > 0) != (paper > 0):
            return "not reproduced (opposite direction)"
        return "same direction, weaker" if abs(iv.mean) < abs(paper) else "same direction, stronger"
    return "not reproduced (the CI contains 0: no significant reduction)"


def claims_table(runs: list, comparisons: list) -> pd.DataFrame:
    """``comparisons[i]``: the federated comparison.json of ``runs[i]`` (None where there is none)."""
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for run, comp in zip(runs, comparisons):
        if not is_federated(run) or comp is None:
            continue
        groups.setdefault((run.scenario, run.substrate, run.cell), []).append(comp)
    rows = []
    for (scenario, substrate, cell), comps in sorted(groups.items()):
        clocks = list(dict.fromkeys(m for c in comps for m in (c.get("claims") or {}).get("by_model", {})))
        for clock in clocks:
            per = [c["claims"]["by_model"][clock] for c in comps if clock in c["claims"].get("by_model", {})]
            reached = sum(1 for p in per if p.get("powertrip_h") is not None and math.isfinite(p["powertrip_h"]))
            for key, claim, paper in CLAIMS:
                vals = np.array([p[key] if p.get(key) is not None else np.nan for p in per], dtype=float)
                vals = vals[np.isfinite(vals)]
                iv = t_interval(vals)
                rows.append({
                    "claim": claim, "paper": f"{paper:+.0f} %", "scenario": scenario, "substrate": substrate,
                    "cell": cell or "-", "clock": clock, "seeds": len(per), "PowerTrip reached target": reached,
                    "mean": "-" if iv is None else f"{iv.mean:+.1f} %",
                    "95 % CI": "-" if iv is None or iv.n < 2 else f"[{iv.lo:+.1f}, {iv.hi:+.1f}] %",
                    "verdict": _verdict(vals, paper)})
    return pd.DataFrame(rows)


def markdown(runs: list, comparisons: list) -> list[str]:
    table = claims_table(runs, comparisons)
    if table.empty:
        return []
    return ["## The PowerTrip paper's claims, over seeds", "",
            "Time-to-accuracy reduction of PowerTrip against the baselines, per scenario, substrate, sweep "
            "cell and round-time clock, over the seeds where both reached the target: the mean, its 95 % "
            f"Student-t CI and a verdict. **reproduced** needs at least {MIN_SEEDS} such seeds and the paper's "
            "number inside a CI that excludes 0; **inconclusive**: the CI holds both. **same direction** means the CI excludes 0 but misses the paper's number. "
            "**not reproduced** means the CI contains 0, or lies on the other side. The paper's hours "
            "(EMNIST, its testbed) are not comparable with ours; the relative reductions are.", "",
            md_table(table), ""]
