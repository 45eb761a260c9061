"""The paper's claims judged over seeds: ``testbed report``'s verdicts.

Runs are grouped by scenario, substrate and sweep cell (one group = one setting, its seeds). Only
groups whose scenario reproduces the paper's setup (testbed.analysis.paper_setup) are judged; the
others are listed as user scenarios. Per group and claim: the per-seed change vs static (%), its
mean and 95 % Student-t CI, a paired t-test and a Wilcoxon signed-rank test of the policy's metric
against static's over the same seeds, and the verdict of testbed.analysis.compare.verdict (which
says "reproduced" only when the paper's number lies in the CI, over at least 10 seeds).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from testbed.analysis import compare as cmp
from testbed.analysis.federated_claims import is_federated
from testbed.analysis.markdown import ci_cells, md_table, p_text
from testbed.analysis.paper_setup import paper_setup
from testbed.stats import paired_test, t_interval


def _label(policies: dict, policy: str) -> str | None:
    """The policy's row: the one labelled with its name, else the first running it."""
    if policy in policies and policies[policy].get("policy") == policy:
        return policy
    return next((lb for lb, r in policies.items() if r.get("policy") == policy), None)


def _num(x) -> float:
    return float(x) if x is not None else float("nan")


def run_groups(runs: list, comparisons: list) -> tuple[dict[tuple[str, str, str], list[dict]],
                                                      dict[tuple[str, str, str], list[dict]], dict[str, str]]:
    """The runs' comparisons (``comparisons[i]`` of ``runs[i]``: testbed.analysis.report_data.comparisons,
    re-derived with today's names), grouped by (scenario, substrate, cell): (paper-setup groups,
    user-scenario groups, {user scenario: why it is not the paper's setup})."""
    paper: dict[tuple[str, str, str], list[dict]] = {}
    other: dict[tuple[str, str, str], list[dict]] = {}
    why_not: dict[str, str] = {}
    for run, comp in zip(runs, comparisons):
        if comp is None or is_federated(run):
            continue
        ok, why = paper_setup(run.resolved)
        if not ok:
            why_not.setdefault(run.scenario, why)
        (paper if ok else other).setdefault((run.scenario, run.substrate, run.cell), []).append(comp)
    return paper, other, why_not


def _change(comps: list[dict], policy_label: str, metric: str, against: str = "static") -> tuple[np.ndarray, np.ndarray]:
    """(the label's ``metric``, the ``against`` policy's) per run where both are there."""
    a, b = [], []
    for c in comps:
        st = _label(c["policies"], against)
        if policy_label in c["policies"] and st:
            a.append(_num(c["policies"][policy_label].get(metric)))
            b.append(_num(c["policies"][st].get(metric)))
    return np.array(a, dtype=float), np.array(b, dtype=float)


def _pct(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(b != 0, 100.0 * (a - b) / b, np.nan)


def policy_table(runs: list, comparisons: list) -> pd.DataFrame:
    """Every scenario (paper setup or not), per substrate, cell and policy: the per-seed change vs
    static of non-renewable energy and of mean JCT (common jobs), mean and 95 % CI with the paired
    t-test's p, and the mean migrations and overruns per run."""
    paper, other, _ = run_groups(runs, comparisons)
    rows = []
    for (scenario, substrate, cell), comps in sorted({**paper, **other}.items()):
        labels = list(dict.fromkeys(lb for c in comps for lb, r in c["policies"].items() if r.get("policy") != "static"))
        for lb in labels:
            row = {"scenario": scenario, "substrate": substrate, "cell": cell or "-", "policy": lb}
            for metric, name in (("grid_kwh", "grid energy vs static"), ("mean_jct_common_s", "JCT vs static")):
                a, b = _change(comps, lb, metric)
                ci, test = t_interval(_pct(a, b)), paired_test(a, b)
                row["seeds"] = 0 if ci is None else ci.n
                shown = ci_cells(ci, "%")
                row[name] = shown["mean"] + ("" if shown["95 % CI"] == "-" else f" {shown['95 % CI'].removesuffix(' %')}")
                row[f"{name}: paired t p"] = "-" if test is None else p_text(test.t_p)
            runs_lb = [c["policies"][lb] for c in comps if lb in c["policies"]]
            row["migrations per run"] = float(np.mean([_num(r.get("migrations")) for r in runs_lb]))
            row["overran per run"] = float(np.mean([_num(r.get("migrations_overran")) for r in runs_lb]))
            row["moved back within 1 h per run"] = float(np.mean([_num(r.get("migrations_returned_1h")) for r in runs_lb]))
            rows.append(row)
    return pd.DataFrame(rows)


def judge(runs: list, comparisons: list) -> tuple[pd.DataFrame, list[tuple[str, str]]]:
    """(one row per paper-setup group and claim, [(user scenario, why it is not the paper's setup)])."""
    groups, _, user = run_groups(runs, comparisons)
    rows = []
    for (scenario, substrate, cell), comps in sorted(groups.items()):
        where = {"scenario": scenario, "substrate": substrate, "cell": cell or "-", "seeds": len(comps)}
        for _, text, paper_text, value, policy, metric in cmp.PAPER_CLAIMS:
            lb = next((x for x in (_label(c["policies"], policy) for c in comps) if x), None)
            a, b = _change(comps, lb, metric) if lb else (np.array([]), np.array([]))
            ci, test = t_interval(_pct(a, b)), paired_test(a, b)
            verdict = cmp.verdict(ci, test, value) if ci is not None or lb is None else f"not measured (no {metric})"
            rows.append({"claim": text, "paper": paper_text, **where, **ci_cells(ci, "%"),
                         "paired test vs static (t p / Wilcoxon p)":
                         "-" if test is None else f"{p_text(test.t_p)} / {p_text(test.wilcoxon_p)}",
                         "verdict": verdict})
        for text, policy, metric in cmp.MIGRATION_EFFECTS:
            rows.append({"claim": text, "paper": "-", **where, **_migration_effect(comps, policy, metric)})
        over, migrations = [], 0
        for c in comps:
            lb = _label(c["policies"], "feasibility_aware")
            if lb:
                over.append(100.0 * _num(c["policies"][lb].get("migration_overhead_frac")))
                migrations += int(c["policies"][lb].get("migrations") or 0)
        ci = t_interval(over)
        rows.append({"claim": cmp.OVERHEAD_CLAIM, "paper": "< 2 %", **where, **ci_cells(ci, "%", 2, sign=""),
                     "paired test vs static (t p / Wilcoxon p)": "-",
                     "verdict": cmp.overhead_verdict(ci, migrations) if over else "not measured (policy missing)"})
        worst = [r.get("max_breakeven_s") for c in comps for r in c["policies"].values()]
        worst = [w for w in worst if w is not None]
        be = cmp.breakeven_claim(max(worst) if worst else None)
        rows.append({"claim": be["claim"], "paper": be["paper"], **where, "mean": be["measured"], "95 % CI": "-",
                     "paired test vs static (t p / Wilcoxon p)": "-", "verdict": be["verdict"]})
    return pd.DataFrame(rows), sorted(user.items())


def _migration_effect(comps: list[dict], policy: str, metric: str) -> dict:
    """``policy``'s per-seed change of ``metric`` against ``placement_only`` (the same initial placement,
    never migrating): the migrations' own effect, with no paper number to compare."""
    lb = next((x for x in (_label(c["policies"], policy) for c in comps) if x), None)
    has_base = any(_label(c["policies"], cmp.PLACEMENT_BASELINE) for c in comps)
    a, b = _change(comps, lb, metric, cmp.PLACEMENT_BASELINE) if lb and has_base else (np.array([]), np.array([]))
    ci, test = t_interval(_pct(a, b)), paired_test(a, b)
    if lb is None or not has_base:
        verdict = f"not measured ({policy if lb is None else cmp.PLACEMENT_BASELINE} not run)"
    else:
        verdict = cmp.effect_verdict(ci, test) if ci is not None else f"not measured (no {metric})"
    return {**ci_cells(ci, "%"), "paired test vs static (t p / Wilcoxon p)":
            "-" if test is None else f"vs {cmp.PLACEMENT_BASELINE}: {p_text(test.t_p)} / {p_text(test.wilcoxon_p)}",
            "verdict": verdict}


def markdown(runs: list, comparisons: list) -> list[str]:
    """The report's policy comparison over seeds and its claims section."""
    table, user = judge(runs, comparisons)
    policies = policy_table(runs, comparisons)
    lines = []
    if len(policies):
        lines += ["## Policies vs static, over seeds", "",
                  "Every scenario, per substrate and sweep cell: the per-seed change vs static (mean, then the 95 % "
                  "Student-t CI in brackets) and the paired t-test's p over the same seeds.", "",
                  md_table(policies), ""]
    lines += ["## The paper's claims, measured", "",
             f"Judged only on scenarios that reproduce the paper's setup ({_criterion()}), per scenario, substrate "
             f"and sweep cell over its seeds: the mean per-seed change vs static, its 95 % Student-t CI, and "
             f"paired tests of the policy's metric against static's over the same seeds. **reproduced**: at least "
             f"{cmp.MIN_SEEDS} seeds and the paper's number inside the CI; **same direction**: a significant "
             f"difference (paired t p < {cmp.SIGNIFICANCE:g}) with the paper's sign but the CI misses its number; "
             "**not reproduced**: no significant difference, or the opposite sign. Migration overhead: reproduced "
             "when the CI lies below 2 %; not applicable when the policy never migrated.", ""]
    if len(table):
        lines += [md_table(table), ""]
    else:
        lines += ["_No run here reproduces the paper's setup, so no claim of the paper is judged._", ""]
    if user:
        lines += ["User scenarios (comparison tables only, the paper's claims not judged): "
                  + "; ".join(f"`{name}` ({why})" for name, why in user) + ".", ""]
    return lines


def _criterion() -> str:
    from testbed.analysis.paper_setup import PAPER_ALPHA, PAPER_DURATION_H, PAPER_SITES

    return (f"a migration study of {PAPER_SITES} sites over {PAPER_DURATION_H:g} h with static and "
            f"feasibility_aware at alpha {PAPER_ALPHA:g}")
