"""Gather the trials' per-policy summaries into one results table and one statistics table.

- ``results.parquet`` / ``results.csv``: one row per trial x policy: ``cell``, the cell's
  parameters (``variant``, one column per grid path, ``$name`` parameters; each column named by
  :func:`testbed.analysis.names.param_column`: ``param_feasibility_alpha``), ``seed``, ``policy``
  (the policy's name), ``label`` (its entry's label), then the metrics.
- ``table.csv`` / ``table.md``: per cell x policy entry (``policy``, ``label``) x metric: ``n`` (seeds with a value), ``mean``,
  ``std`` (sample, ddof=1) and ``ci95`` (half-width of the Student-t 95 % interval of the mean,
  ``t(0.975, n-1) * std / sqrt(n)``; empty for n < 2).

Only recorded results go in (no wall times, hosts or dates) and rows follow the plan's order, so
the same trials give byte-identical tables whether they ran locally or on Ray.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
from testbed.stats import mean_ci95  # n, mean, std, 95 % CI half-width: the one rule (report --check uses it)

from testbed.analysis.names import current
from testbed.errors import SpecError
from testbed.spec.federated_checks import policy_entries
from testbed.spec.policies import policy_label
from testbed.sweep.metrics import metric_problems
from testbed.sweep.plan import SweepPlan, Trial

STAT_COLUMNS = ("n", "mean", "std", "ci95")


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _param_column(values: list[Any]) -> list[Any]:
    """Numbers, or booleans, (and None) stay as they are; anything else becomes text (JSON for lists
    and mappings), so that a column has one type."""
    if all(v is None or _is_number(v) for v in values) or all(v is None or isinstance(v, bool) for v in values):
        return values
    return [v if isinstance(v, str) else json.dumps(v, sort_keys=True, default=str) for v in values]


def _summaries(out: Path, trial: Trial) -> list[dict]:
    """The trial's per-policy summaries, in the scenario's policy order."""
    rows = []
    for spec in policy_entries(trial.cell.loaded.scenario):  # a federated one's under each clock
        path = out / trial.rel_dir / policy_label(spec) / "summary.json"
        rows.append(current(json.loads(path.read_text(encoding="utf-8"))))  # written before a rename: today's names
    return rows


def _metric_names(summaries: list[dict], wanted: list[str] | None, sweep_file: str | Path,
                  declared: tuple[str, ...] = ()) -> list[str]:
    numeric: dict[str, bool] = {}
    for s in summaries:
        for k, v in s.items():
            if k in ("policy", "label"):
                continue
            numeric[k] = numeric.get(k, True) and (v is None or _is_number(v))
    if wanted is None:
        return [k for k, ok in numeric.items() if ok]
    if not summaries:  # no trial done: nothing to check the names against
        return list(wanted)
    # plan_sweep checked the names against the study's columns (``declared``); a declared column no
    # run wrote (co2_kg without a carbon trace) is NaN; this catches values that are not numbers
    problems = metric_problems(wanted, numeric, str(sweep_file), optional=declared)
    if problems:
        raise SpecError(problems)
    return list(wanted)


def results_frame(out: Path, plan: SweepPlan, done: set[str]) -> tuple[pd.DataFrame, list[str]]:
    """One row per completed trial x policy, in plan order; and the metric columns."""
    rows: list[dict] = []
    summaries: list[dict] = []
    for trial in plan.trials:
        if trial.rel_dir not in done:
            continue
        for s in _summaries(out, trial):
            summaries.append(s)
            rows.append({"cell": trial.cell.id, **{c: trial.cell.params.get(p) for p, c in plan.columns.items()},
                         "seed": trial.seed, "policy": s.get("policy"), "label": s.get("label"), "_s": s})
    from testbed.studies import summary_metrics_for

    declared = summary_metrics_for(plan.base.scenario) or ()
    metrics = _metric_names(summaries, plan.sweep.spec.metrics, plan.sweep.where or plan.sweep.path, declared)
    for row in rows:
        s = row.pop("_s")
        row.update({m: (float(s[m]) if s.get(m) is not None else math.nan) for m in metrics})
    params = list(plan.columns.values())
    for c in params:
        for row, v in zip(rows, _param_column([row[c] for row in rows])):
            row[c] = v
    columns = ["cell", *params, "seed", "policy", "label", *metrics]
    return pd.DataFrame(rows, columns=columns), metrics


def stats_table(results: pd.DataFrame, metrics: list[str], plan: SweepPlan) -> pd.DataFrame:
    """mean / std / n / ci95 per cell x policy (label) x metric, in plan and policy order."""
    rows = []
    params = list(plan.columns.values())
    first = results.drop_duplicates(["cell", "label"])
    for _, key in first.iterrows():
        group = results[(results["cell"] == key["cell"]) & (results["label"] == key["label"])].sort_values("seed")
        for m in metrics:
            n, mean, std, ci = mean_ci95(group[m].to_numpy(dtype=float))
            rows.append({"cell": key["cell"], **{c: key[c] for c in params}, "policy": key["policy"],
                         "label": key["label"], "metric": m, "n": n, "mean": mean, "std": std, "ci95": ci})
    return pd.DataFrame(rows, columns=["cell", *params, "policy", "label", "metric", *STAT_COLUMNS])


def _fmt(x: Any) -> str:
    if isinstance(x, float):
        return "" if math.isnan(x) else f"{x:.4g}"
    return "" if x is None else str(x)


def table_markdown(table: pd.DataFrame, plan: SweepPlan, n_trials_done: int, n_failed: int) -> str:
    sw = plan.sweep
    seeds = sorted({t.seed for t in plan.trials})
    lines = [f"# Sweep {sw.name}", "",
             f"- scenario: `{sw.scenario_path.name}`; substrate: {plan.substrate}; seeds: {seeds}",
             f"- cells: {len(plan.cells)}; trials: {len(plan.trials)} planned, {n_trials_done} done, {n_failed} failed",
             "- per cell x policy: n seeds, mean, std (ddof=1), ci95 = half-width of the Student-t 95 % CI of the mean",
             ""]
    head = ["cell", *plan.columns.values(), "label", "n", "mean", "std", "ci95"]
    shown = ["cell", *plan.columns, "policy", "n", "mean", "std", "ci95"]  # parameters by their paths
    for metric, group in table.groupby("metric", sort=False):
        lines += [f"## {metric}", "", "| " + " | ".join(shown) + " |", "|" + "---|" * len(head)]
        for _, r in group.iterrows():
            lines.append("| " + " | ".join(_fmt(r[c]) for c in head) + " |")
        lines.append("")
    return "\n".join(lines)


def write_outputs(out: Path, plan: SweepPlan, done: set[str], n_failed: int) -> pd.DataFrame:
    """Write results.parquet/csv and table.csv/md; returns the statistics table."""
    results, metrics = results_frame(out, plan, done)
    table = stats_table(results, metrics, plan)
    results.to_parquet(out / "results.parquet", index=False)
    results.to_csv(out / "results.csv", index=False)
    table.to_csv(out / "table.csv", index=False)
    (out / "table.md").write_text(table_markdown(table, plan, len(done), n_failed), encoding="utf-8")
    return table
