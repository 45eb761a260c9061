"""Policies side by side, and the migration paper's claims (arXiv 2511.16182) beside what this run
measured (only for a scenario that reproduces the paper's setup: testbed.analysis.paper_setup). A verdict on a claim needs
``MIN_SEEDS`` seeds; ``testbed report`` gives it over a sweep's seeds (testbed.analysis.claims)."""

from __future__ import annotations

import pandas as pd

from testbed.feasibility import breakeven_min, energy_cost_kwh, transfer_time_s

# The migration paper's (arXiv 2511.16182) headline claims.
PAPER = {
    "nonrenewable_fa_vs_static_pct": -52.0,
    "jct_fa_vs_static_pct": -18.0,
    "jct_eo_vs_static_pct": 35.0,
    "overhead_fa_max_frac": 0.02,
    "breakeven_40gb_10gbps_min": 1.3,
}


def pct_change(x: float | None, ref: float | None) -> float | None:
    if x is None or ref is None or ref == 0:
        return None
    return (x - ref) / ref * 100.0


def common_mean_jct_s(jobs: dict[str, pd.DataFrame], labels: list[str]) -> dict[str, float | None]:
    """Mean JCT over the jobs that *every* policy completed, so unfinished jobs bias no one."""
    done_sets = [set(jobs[lb].loc[jobs[lb]["status"] == "completed", "job_id"]) for lb in labels]
    common = set.intersection(*done_sets) if done_sets else set()
    out: dict[str, float | None] = {}
    for lb in labels:
        df = jobs[lb]
        sel = df[df["job_id"].isin(common)]
        out[lb] = float(sel["jct_s"].mean()) if len(sel) else None
    return out


MIN_SEEDS = 10  # a claim is judged over at least this many seeds of one scenario cell
SIGNIFICANCE = 0.05  # two-sided level of the paired test vs static

# The claims judged per seed, each a per-seed change vs static of a policy's metric:
# (key, claim, paper's text, paper's value, policy, metric in comparison.json's policy rows).
PAPER_CLAIMS = (
    ("nonrenewable_fa", "Feasibility-aware: non-renewable energy vs Static", "-52 %",
     PAPER["nonrenewable_fa_vs_static_pct"], "feasibility_aware", "grid_kwh"),
    ("jct_fa", "Feasibility-aware: mean JCT vs Static", "-18 %", PAPER["jct_fa_vs_static_pct"],
     "feasibility_aware", "mean_jct_common_s"),
    ("jct_eo", "Energy-only: mean JCT vs Static", "+35 %", PAPER["jct_eo_vs_static_pct"], "energy_only",
     "mean_jct_common_s"),
    # the paper's Algorithm 1 as written (no damping): where a scenario runs it beside the damped policy
    ("nonrenewable_fa_paper", "Feasibility-aware, Algorithm 1 undamped: non-renewable energy vs Static", "-52 %",
     PAPER["nonrenewable_fa_vs_static_pct"], "feasibility_aware_paper", "grid_kwh"),
    ("jct_fa_paper", "Feasibility-aware, Algorithm 1 undamped: mean JCT vs Static", "-18 %",
     PAPER["jct_fa_vs_static_pct"], "feasibility_aware_paper", "mean_jct_common_s"),
)
OVERHEAD_CLAIM = "Feasibility-aware: migration overhead"

# The migrations' own effect: a policy against ``placement_only`` (the migrating policies' initial
# placement, never migrating), so that placement and migration are not credited together.
PLACEMENT_BASELINE = "placement_only"
MIGRATION_EFFECTS = (
    ("Feasibility-aware: grid energy vs placement_only (migration's own effect)", "feasibility_aware", "grid_kwh"),
    ("Feasibility-aware: mean JCT vs placement_only (migration's own effect)", "feasibility_aware",
     "mean_jct_common_s"),
)


def effect_verdict(interval, paired, against: str = PLACEMENT_BASELINE) -> str:
    """A change against a baseline (``against``) with no paper number: whether it is there, over
    ``MIN_SEEDS`` seeds."""
    if interval.n < MIN_SEEDS:
        return not_enough_seeds(interval.n)
    p = paired.t_p if paired is not None else float("nan")
    if not p < SIGNIFICANCE:
        return f"no significant effect (paired t p={p:.2g})"
    return f"lower than {against}" if interval.mean < 0 else f"higher than {against}"


def not_enough_seeds(n: int) -> str:
    return f"not enough seeds (n={n}<{MIN_SEEDS})"


def verdict(interval, paired, paper: float, against: str = "static") -> str:
    """A change-vs-baseline claim over seeds (both studies' one rule): ``interval`` (stats.Interval of
    the per-seed change, %) and ``paired`` (stats.PairedTest of the policy's metric against the
    baseline's, ``against``, per seed).

    - "reproduced": at least ``MIN_SEEDS`` seeds, the paper's number lies in the 95 % CI and the
      paired test finds a difference (p < 0.05); "inconclusive" when it finds none;
    - "same direction, weaker/stronger": the paired test finds a difference (p < 0.05) with the
      paper's sign, but the CI misses the paper's number;
    - "not reproduced (...)": the difference is not significant, or has the opposite sign;
    - "not enough seeds (n<10)": too few seeds to judge."""
    if interval is None:
        return "not measured (policy missing)"
    if interval.n < MIN_SEEDS:
        return not_enough_seeds(interval.n)
    p = paired.t_p if paired is not None else float("nan")
    if interval.lo <= paper <= interval.hi:
        if not p < SIGNIFICANCE:
            return (f"inconclusive (the CI holds the paper's number, but no significant difference from {against}, "
                    f"p={p:.2g})")
        return "reproduced"
    if not p < SIGNIFICANCE:
        return f"not reproduced (no significant difference from {against}, paired t p={p:.2g})"
    if interval.mean * paper < 0:
        return "not reproduced (opposite direction)"
    return "same direction, weaker" if abs(interval.mean) < abs(paper) else "same direction, stronger"


def overhead_verdict(interval, migrations: int) -> str:
    """"< 2 %" over seeds: reproduced when the 95 % CI of the overhead lies below 2 %; a policy
    that never migrated has no overhead to speak of."""
    if migrations == 0:
        return "not applicable (no migration)"
    if interval is None:
        return "not measured (policy missing)"
    if interval.n < MIN_SEEDS:
        return not_enough_seeds(interval.n)
    limit = PAPER["overhead_fa_max_frac"] * 100.0
    return "reproduced" if interval.hi < limit else f"not reproduced (95 % CI reaches {limit:g} %)"


def breakeven_claim(max_breakeven_s: float | None) -> dict:
    """Eq. 2 for the paper's 40 GB @ 10 Gbit/s (analytic, no seed), beside the largest here."""
    analytic = breakeven_min(energy_cost_kwh(1.8, transfer_time_s(40, 10)), 0.75)
    worst = None if max_breakeven_s is None else max_breakeven_s / 60.0
    return {
        "claim": "Energy breakeven within minutes (40 GB @ 10 Gbit/s: ~1.3 min)",
        "paper": "~1.3 min",
        "measured": f"{analytic:.2f} min (Eq. 2); largest over all migrations here: "
        + ("none" if worst is None else f"{worst:.2f} min"),
        "verdict": ("reproduced for 40 GB @ 10 Gbit/s" if abs(analytic - 1.28) < 0.05 else "not reproduced")
        + ("" if worst is None or worst < 10 else "; not 'minutes' for the largest checkpoint/slowest link here"),
    }


def _first(summaries: dict[str, dict], policy: str) -> str | None:
    return next((lb for lb, s in summaries.items() if s["policy"] == policy), None)


def compare(summaries: dict[str, dict], jobs: dict[str, pd.DataFrame], paper: tuple[bool, str] | None = None) -> dict:
    """The policies side by side (changes vs static) and, when ``paper`` (testbed.analysis.
    paper_setup's answer for the run's scenario) says the scenario reproduces the paper's setup,
    the paper's claims with this run's value. One run is one seed: a verdict needs
    ``MIN_SEEDS`` (``testbed report`` over a sweep judges them); here each says so."""
    labels = list(summaries)
    static = _first(summaries, "static")
    jct_common = common_mean_jct_s(jobs, labels)
    rows = {}
    for lb, s in summaries.items():
        ref = summaries[static] if static else None
        rows[lb] = {
            **s,
            "mean_jct_common_s": jct_common[lb],
            "grid_change_vs_static_pct": pct_change(s["grid_kwh"], ref and ref["grid_kwh"]),
            "grid_per_gpu_h_change_vs_static_pct": pct_change(
                s["grid_kwh_per_gpu_h"], ref and ref["grid_kwh_per_gpu_h"]
            ),
            "mean_jct_change_vs_static_pct": pct_change(jct_common[lb], jct_common[static]) if static else None,
        }
        for key in ("co2_kg", "grid_cost"):  # present only where the scenario has carbon / price traces
            if key in s:
                rows[lb][f"{key}_change_vs_static_pct"] = pct_change(s[key], ref.get(key) if ref else None)
    out = {"reference_policy": static, "policies": rows, "claims": []}
    if paper is not None:
        out["paper_setup"] = {"matches": bool(paper[0]), "reason": paper[1]}
        if not paper[0]:
            return out
    for key, text, paper_text, value, policy, metric in PAPER_CLAIMS:
        lb = _first(summaries, policy)
        change = "grid_change_vs_static_pct" if metric == "grid_kwh" else "mean_jct_change_vs_static_pct"
        measured = rows[lb][change] if lb and static else None
        out["claims"].append({
            "claim": text, "paper": paper_text, "key": key,
            "measured": None if measured is None else f"{measured:+.1f} %", "measured_value": measured,
            "verdict": "not measured (policy missing)" if measured is None else not_enough_seeds(1),
        })
    fa = _first(summaries, "feasibility_aware")
    overhead = rows[fa]["migration_overhead_frac"] if fa else None
    out["claims"].append({
        "claim": OVERHEAD_CLAIM, "paper": "< 2 %", "key": "overhead_fa",
        "measured": None if overhead is None else f"{overhead * 100:.2f} %",
        "measured_value": None if overhead is None else overhead * 100.0,
        "verdict": "not measured (policy missing)" if overhead is None
        else ("not applicable (no migration)" if not rows[fa]["migrations"] else not_enough_seeds(1)),
    })
    worst = max((s["max_breakeven_s"] for s in summaries.values() if s["max_breakeven_s"] is not None), default=None)
    out["claims"].append({**breakeven_claim(worst), "key": "breakeven"})
    return out


SHOWN_IN_HOURS = frozenset({"mean_jct_s", "median_jct_s", "p95_jct_s", "mean_jct_common_s", "mean_queue_wait_s"})
"""Durations recorded in seconds (one unit per quantity in every output) that tables for people show in hours."""


def shown(key: str, value):
    """``value`` of ``key`` as a table for people shows it (a job's times in hours)."""
    return value / 3600.0 if key in SHOWN_IN_HOURS and isinstance(value, (int, float)) else value


def _fmt(x, digits: int = 2) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


def comparison_markdown(cmp: dict, *, title: str, notes: list[str]) -> str:
    cols = [
        ("grid_kwh", "grid kWh", 1), ("renewable_kwh", "renewable kWh", 1),
        ("renewable_fraction", "renewable share", 3), ("mean_jct_s", "mean JCT h", 2),
        ("mean_jct_common_s", "mean JCT h (common jobs)", 2), ("p95_jct_s", "p95 JCT h", 2),
        ("jobs_completed", "jobs done", 0), ("migrations", "migrations", 0),
        ("migrations_overran", "overran budget", 0), ("migrations_outside_window", "outside window", 0),
        ("migration_overhead_frac", "overhead frac", 4),
        ("grid_change_vs_static_pct", "grid kWh vs static %", 1),
        ("mean_jct_change_vs_static_pct", "JCT vs static %", 1),
    ]
    present = [r for r in cmp["policies"].values()]
    # where they apply: the energy batteries delivered (renewable + battery + grid kWh = all drawn) and the
    # renewable energy curtailed, after renewable kWh; the moves made without a renewable window, after
    # the window's verdicts
    for after, key, head, digits in (("migrations_outside_window", "migrations_without_window", "no window", 0),
                                     ("renewable_kwh", "curtailed_kwh", "curtailed kWh", 1),
                                     ("renewable_kwh", "battery_discharge_kwh", "battery kWh", 1)):
        if any(key in r for r in present) and (key != "migrations_without_window" or any(r.get(key) for r in present)):
            cols.insert([c[0] for c in cols].index(after) + 1, (key, head, digits))
    for key, head, digits in (("co2_kg", "CO2 kg", 3), ("grid_cost", "grid cost", 2)):
        if any(key in r for r in present):  # carbon / price traces: the grid energy's CO2 and cost
            cols += [(key, head, digits), (f"{key}_change_vs_static_pct", f"{head} vs static %", 1)]
    lines = [f"# {title}", ""]
    lines += ["## Policies", "", "| policy | " + " | ".join(c[1] for c in cols) + " |",
              "|---|" + "---:|" * len(cols)]
    for lb, r in cmp["policies"].items():
        lines.append(f"| {lb} | " + " | ".join(_fmt(shown(k, r.get(k)), d) for k, _, d in cols) + " |")
    setup = cmp.get("paper_setup")
    if setup is not None and not setup["matches"]:
        lines += ["", "## The paper's claims", "",
                  f"Not judged: this scenario does not reproduce the paper's setup ({setup['reason']}); "
                  "see testbed/analysis/paper_setup.py for what does."]
    else:
        lines += ["", "## The paper's claims beside this run", "",
                  f"One run is one seed: a claim is judged over at least {MIN_SEEDS} seeds of the same scenario "
                  "(`testbed sweep` with that many seeds, then `testbed report`), with the 95 % CI of the mean "
                  "and a paired test vs static.", "",
                  "| claim | paper | measured (this seed) | verdict |", "|---|---|---|---|"]
        for c in cmp["claims"]:
            lines.append(f"| {c['claim']} | {c['paper']} | {c['measured'] or '-'} | {c['verdict']} |")
    lines += ["", "## Definitions", ""] + [f"- {n}" for n in notes] + [""]
    return "\n".join(lines)
