"""Two or more results side by side (``testbed compare``, ``testbed.compare``): what differs between
their resolved scenarios, path by path, and per policy and metric the change against the first,
with a 95 % CI paired by seed where the seeds match.

Each side is a :class:`Group`: the runs of one scenario (a run's directory is one run; a sweep
gives one group per cell, its seeds the runs). The first group is the baseline. Per policy and
metric the change is ``other - baseline``:

- **paired** where at least two seeds ran on both sides: the mean of the per-seed differences,
  the Student-t 95 % CI of that mean (:func:`testbed.stats.t_interval`) and the paired t-test's
  p (:func:`testbed.stats.paired_test`), over the seeds in common (the others are named, left out);
- **unpaired** where fewer than two seeds match but each side has at least two runs: the
  difference of the means with Welch's 95 % CI (unequal variances) and its p;
- **none** otherwise (one run against one run of another seed, or a single common seed): the
  difference of the means, no CI, and a note saying why.

Pure: groups in, a DataFrame out (reading directories is :func:`testbed.api.compare`'s).
"""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np
import pandas as pd

from testbed.analysis.compare import pct_change
from testbed.stats import paired_test, t_interval

IGNORED = ("seed",)
"""Top-level scenario fields not diffed: the seed is what pairing is about (shown per group)."""

MAX_SHOWN = 40
"""Scenario differences printed per group (the DataFrame's ``attrs`` holds them all)."""

COLUMNS = ["baseline", "other", "policy", "metric", "n_baseline", "n_other", "mean_baseline", "mean_other",
           "change", "change_pct", "ci_lo", "ci_hi", "ci", "n_pairs", "p_value", "note"]


@dataclass
class Group:
    """One side of a comparison: ``name`` (as shown), the resolved ``scenario`` (its seed aside) and,
    per seed, per policy entry (label), its summary."""

    name: str
    scenario: dict
    runs: dict[int, dict[str, dict]] = field(default_factory=dict)

    @property
    def seeds(self) -> list[int]:
        return sorted(self.runs)

    def labels(self) -> list[str]:
        return list(dict.fromkeys(lb for by_label in self.runs.values() for lb in by_label))

    def values(self, label: str, metric: str) -> dict[int, float]:
        """seed -> the metric's value (NaN where missing or not a number)."""
        return {s: _number(by_label.get(label, {}).get(metric)) for s, by_label in sorted(self.runs.items())}


def _number(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return math.nan
    return float(v)


def _seeds(seeds: Iterable[int]) -> str:
    seeds = list(seeds)
    return f"seed{'s' if len(set(seeds)) != 1 else ''} {seeds_text(seeds)}"


def seeds_text(seeds: Iterable[int]) -> str:
    """``0-9``, ``1, 4, 7``: a list of seeds, runs of consecutive ones shortened."""
    seeds = sorted(set(seeds))
    if not seeds:
        return "none"
    parts, start = [], seeds[0]
    for prev, cur in zip(seeds, seeds[1:] + [None]):
        if cur is None or cur != prev + 1:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
            start = cur
    return ", ".join(parts)


# ------------------------------------------------------------------------------ scenarios

def _ident(item: Any) -> Any:
    """How a list entry is named in a path: its label, else its name (a bare string is its name),
    as the override syntax selects it (``policies[feasibility_aware].alpha``)."""
    if isinstance(item, str):
        return item
    return (item.get("label") or item.get("name")) if isinstance(item, dict) else None


def _by_ident(items: list) -> dict[str, Any] | None:
    ids = [_ident(v) for v in items]
    if not items or not all(isinstance(i, str) for i in ids) or len(set(ids)) != len(ids):
        return None
    return dict(zip(ids, items))


def scenario_diff(a: Any, b: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """Every leaf path whose value differs between ``a`` and ``b`` (scenario data), with both
    values: ``("links[0].bandwidth_gbps", 10.0, 5.0)``. List entries are named by label or name
    where every entry has a distinct one (``policies[feasibility_aware].alpha``,
    ``sites[rome].nodes``), else by index; a key or entry on one side only is paired with
    :data:`ABSENT`."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in list(dict.fromkeys([*a, *b])):
            if not path and k in IGNORED:
                continue
            here = f"{path}.{k}" if path else str(k)
            out += scenario_diff(a.get(k, ABSENT), b.get(k, ABSENT), here)
        return out
    if isinstance(a, list) and isinstance(b, list):
        ka, kb = _by_ident(a), _by_ident(b)
        if ka is not None and kb is not None:
            return [d for k in dict.fromkeys([*ka, *kb])
                    for d in scenario_diff(ka.get(k, ABSENT), kb.get(k, ABSENT), f"{path}[{k}]")]
        return [d for i in range(max(len(a), len(b)))
                for d in scenario_diff(a[i] if i < len(a) else ABSENT, b[i] if i < len(b) else ABSENT, f"{path}[{i}]")]
    if _same(a, b):
        return []
    return [(path, a, b)]


class _Absent:
    """One value for "not there" (copies of a DataFrame's attrs keep it the same object)."""

    def __repr__(self) -> str:
        return "(absent)"

    def __copy__(self) -> "_Absent":
        return self

    def __deepcopy__(self, memo) -> "_Absent":
        return self

    def __reduce__(self) -> str:
        return "ABSENT"


ABSENT = _Absent()
"""The value of a key or list entry that one side does not have."""


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) \
            and not isinstance(b, bool):
        return float(a) == float(b) or (math.isnan(float(a)) and math.isnan(float(b)))
    return a is b or (type(a) is type(b) and a == b)


def show(v: Any, width: int = 60) -> str:
    """A scenario value in one short line: ``10``, ``null``, ``{"a": 1}`` (long ones cut)."""
    if v is ABSENT:
        return "(absent)"
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:g}"
    text = v if isinstance(v, str) else json.dumps(v, sort_keys=True, default=str)
    return text if len(text) <= width else text[: width - 3] + "..."


# ------------------------------------------------------------------------------ metrics

def numeric_metrics(groups: list[Group]) -> list[str]:
    """The summary fields that are numbers in every group (their first run's), in first-seen order."""
    def numeric(g: Group) -> list[str]:
        return [k for by_label in g.runs.values() for s in by_label.values() for k, v in s.items()
                if isinstance(v, (int, float)) and not isinstance(v, bool)]

    names = list(dict.fromkeys(numeric(groups[0])))
    for g in groups[1:]:
        there = set(numeric(g))
        names = [n for n in names if n in there]
    return names


def _welch(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float]:
    """Welch's 95 % CI of ``mean(b) - mean(a)`` and its p (NaN where the spread is zero on both sides)."""
    from scipy import stats

    if np.ptp(a) == 0 and np.ptp(b) == 0:
        return math.nan, math.nan, math.nan
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        res = stats.ttest_ind(b, a, equal_var=False)
        ci = res.confidence_interval(0.95)
    return float(ci.low), float(ci.high), float(res.pvalue)


def change(base: dict[int, float], other: dict[int, float]) -> dict:
    """The change ``other - base`` of one metric of one policy (seed -> value on each side): the
    row's numbers and ``ci`` (paired / unpaired / none) with a ``note`` saying why."""
    a_all = np.array([v for v in base.values() if math.isfinite(v)])
    b_all = np.array([v for v in other.values() if math.isfinite(v)])
    row = {"n_baseline": int(a_all.size), "n_other": int(b_all.size),
           "mean_baseline": float(a_all.mean()) if a_all.size else math.nan,
           "mean_other": float(b_all.mean()) if b_all.size else math.nan,
           "ci_lo": math.nan, "ci_hi": math.nan, "p_value": math.nan, "n_pairs": 0}
    common = [s for s in base if s in other and math.isfinite(base[s]) and math.isfinite(other[s])]
    only_a = sorted(s for s in base if s not in common and math.isfinite(base[s]))
    only_b = sorted(s for s in other if s not in common and math.isfinite(other[s]))
    row["change"] = row["mean_other"] - row["mean_baseline"]
    if not a_all.size or not b_all.size:
        side = "the baseline" if not a_all.size else "the other side"
        return {**row, "ci": "none", "note": f"no value on {side}"}
    if len(common) >= 2:
        a = np.array([base[s] for s in common])
        b = np.array([other[s] for s in common])
        iv, test = t_interval(b - a), paired_test(b, a)
        left = []
        if only_a:
            left.append(f"{_seeds(only_a)} only in the baseline")
        if only_b:
            left.append(f"{_seeds(only_b)} only in the other")
        note = f"paired by seed over {_seeds(common)}"
        if left:
            note += f" ({'; '.join(left)}: left out)"
        if not np.any(b - a):
            note += "; equal in every seed"
        return {**row, "change": iv.mean, "ci_lo": iv.lo, "ci_hi": iv.hi, "ci": "paired", "n_pairs": len(common),
                "p_value": test.t_p if test is not None else math.nan, "note": note,
                "mean_baseline": float(a.mean()), "mean_other": float(b.mean())}
    why = ("one seed in common" if len(common) == 1 else "no seed in common") + \
        f" (baseline: {_seeds(base)}; other: {_seeds(other)})"
    if a_all.size >= 2 and b_all.size >= 2:
        lo, hi, p = _welch(a_all, b_all)
        note = f"unpaired (Welch, unequal variances): {why}"
        if math.isnan(lo):
            note += "; no spread on either side, so no CI"
        return {**row, "ci_lo": lo, "ci_hi": hi, "p_value": p, "ci": "unpaired" if not math.isnan(lo) else "none",
                "n_pairs": len(common), "note": note}
    return {**row, "ci": "none", "n_pairs": len(common),
            "note": f"no CI: {why}; a CI needs two seeds run on both sides (paired), or two runs on each side "
                    "(unpaired)"}


def compare_groups(groups: list[Group], metrics: list[str] | None = None,
                   policies: list[str] | None = None) -> pd.DataFrame:
    """Per other group, policy entry (label) and metric: the change against ``groups[0]``
    (:func:`change`; columns :data:`COLUMNS`). ``attrs``: ``groups`` (name -> seeds),
    ``scenario_diff`` (other's name -> ``[(path, baseline value, other value), ...]``, :data:`ABSENT`
    for a key on one side only) and
    ``policies_missing`` (other's name -> labels on one side only)."""
    if len(groups) < 2:
        raise ValueError("a comparison needs at least two results (a sweep with several cells counts as several)")
    base = groups[0]
    metrics = list(metrics) if metrics else numeric_metrics(groups)
    rows, diffs, missing = [], {}, {}
    for other in groups[1:]:
        diffs[other.name] = scenario_diff(base.scenario, other.scenario)
        labels = [lb for lb in base.labels() if lb in other.labels()]
        missing[other.name] = sorted(set(base.labels()) ^ set(other.labels()))
        for lb in labels:
            if policies and lb not in policies:
                continue
            for m in metrics:
                rows.append({"baseline": base.name, "other": other.name, "policy": lb, "metric": m,
                             **change(base.values(lb, m), other.values(lb, m))})
    df = pd.DataFrame(rows, columns=COLUMNS)
    df["change_pct"] = [pct_change(o, b) if math.isfinite(b) and math.isfinite(o) else None
                        for b, o in zip(df["mean_baseline"], df["mean_other"])]
    df["change_pct"] = df["change_pct"].astype(float)
    df.attrs = {"groups": {g.name: g.seeds for g in groups}, "scenario_diff": diffs, "policies_missing": missing}
    return df


# ------------------------------------------------------------------------------ text

def _num(x: float, digits: int = 4) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:.{digits}g}"


def text_report(df: pd.DataFrame, groups: list[Group], *, all_metrics: bool = False) -> str:
    """What ``testbed compare`` prints: the groups (A, B, ...), each other's scenario differences
    from A, and per policy the metrics that changed (all with ``all_metrics``)."""
    letters = {g.name: chr(ord("A") + i) if i < 26 else f"#{i}" for i, g in enumerate(groups)}
    lines = []
    for g in groups:
        n = len(g.runs)
        lines.append(f"{letters[g.name]}: {g.name} ({n} run{'s' if n != 1 else ''}, {_seeds(g.seeds)})")
    base = groups[0]
    for other in groups[1:]:
        a, b = letters[base.name], letters[other.name]
        diff = df.attrs["scenario_diff"][other.name]
        lines += ["", f"scenario, {b} vs {a}: " + (f"{len(diff)} difference{'s' if len(diff) != 1 else ''}"
                                                    if diff else "the same (seeds aside)")]
        for path, va, vb in diff[:MAX_SHOWN]:
            lines.append(f"  {path}: {show(va)} -> {show(vb)}")
        if len(diff) > MAX_SHOWN:
            lines.append(f"  ... and {len(diff) - MAX_SHOWN} more (testbed.compare(...).attrs['scenario_diff'])")
        part = df[df["other"] == other.name]
        lines += ["", f"metrics, {b} vs {a} (change = {b} - {a}; 95 % CI paired by seed where the seeds match):"]
        if df.attrs["policies_missing"].get(other.name):
            lines.append(f"  policies on one side only (not compared): {', '.join(df.attrs['policies_missing'][other.name])}")
        changed = part if all_metrics else part[~((part["change"] == 0) & (part["mean_baseline"] == part["mean_other"]))]
        same = sorted(set(part["metric"]) - set(changed["metric"]))
        if len(changed):
            head = ("policy", "metric", a, b, "change", "95 % CI", "%", "CI")
            body = [(r.policy, r.metric, _num(r.mean_baseline), _num(r.mean_other), _num(r.change),
                     "-" if math.isnan(r.ci_lo) else f"[{_num(r.ci_lo, 3)}, {_num(r.ci_hi, 3)}]",
                     "-" if r.change_pct is None or math.isnan(r.change_pct) else f"{r.change_pct:+.1f}",
                     r.ci + (f" (n={r.n_pairs})" if r.ci == "paired" else ""))
                    for r in changed.itertuples()]
            widths = [max(len(str(x)) for x in col) for col in zip(head, *body)]
            for cells in (head, *body):
                lines.append("  " + "  ".join(str(c).ljust(w) if i < 2 or i == 7 else str(c).rjust(w)
                                              for i, (c, w) in enumerate(zip(cells, widths))).rstrip())
        else:
            lines.append("  no metric changed")
        if same and not all_metrics:
            lines.append(f"  equal on both sides in every run ({len(same)}): {', '.join(same)}")
        notes = list(dict.fromkeys(changed["note"]))
        if notes:
            lines += ["  CI: " + notes[0]] + [f"      {n}" for n in notes[1:4]]
            if len(notes) > 4:
                lines.append(f"      ... ({len(notes) - 4} more notes: the DataFrame's note column)")
    return "\n".join(lines)

