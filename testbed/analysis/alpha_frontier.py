"""The alpha trade-off as a result: grid energy against overruns across alpha, and alpha chosen on
one scenario judged on another.

Input: the report's summaries (one row per run x policy) of runs that sweep alpha (a ``param_``
column whose name ends with ``alpha``). Each policy's alpha in a run is the one it decided with
(its resolved scenario entry, which inherits the scenario model's alpha when it sets none),
else the swept value of ``policies[<label>].alpha``, else of the scenario model's alpha. A policy
whose entry takes no alpha (static, energy_only) is not steered by it: only the budget its
migrations are judged against moves, so it is left out of the frontier and of the choice.

- **Frontier**: per scenario, substrate, policy and alpha, the mean over seeds of grid energy
  (``grid_kwh``) and of the overrun rate (``migrations_overran / migrations`` of each run; a run
  without migrations has no rate), each with a 95 % Student-t interval.
- **Choice**: the alpha that minimises the mean grid energy subject to a mean overrun rate at most
  :data:`OVERRUN_BUDGET_FRAC`, per policy; where no swept alpha keeps the budget, the alpha with the
  least overruns, and the table says so.
- **Out of sample**: with alpha sweeps of two or more scenarios (same substrate), alpha is chosen on
  the first (in the order the report was given its inputs) and judged on each other one beside that
  scenario's own choice: its grid energy and overrun rate there, and the regret (grid kWh at the
  chosen alpha - at the scenario's own choice, paired per seed).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from testbed.analysis.markdown import md_table
from testbed.analysis.names import PARAM_PREFIX, param_column
from testbed.stats import Interval, t_interval
from testbed.analysis.figures import save as save_figure

OVERRUN_BUDGET_FRAC = 0.05
"""The overrun rate (overruns per migration, mean over seeds) a chosen alpha may not exceed."""

HOLDOUT_SWEEP = "sweeps/validate-alpha-holdout.yaml"
_KEY = ["scenario", "substrate", "label"]


def alpha_params(sums: pd.DataFrame) -> list[str]:
    """The swept alpha parameters: ``param_`` columns ending with ``alpha`` that take two or more values."""
    return [c for c in sums.columns if c.startswith(PARAM_PREFIX) and c.endswith("alpha")
            and pd.to_numeric(sums[c], errors="coerce").dropna().nunique() > 1]


def _policy_alpha(run, label: str) -> tuple[bool, float | None]:
    """(whether the run's policy ``label`` takes an alpha, the alpha it decided with) from the run's
    resolved scenario; (False, None) when the run carries none."""
    resolved = getattr(run, "resolved", None) or {}
    for entry in resolved.get("policies") or []:
        if isinstance(entry, dict) and (entry.get("label") or entry.get("name")) == label:
            return "alpha" in entry, (float(entry["alpha"]) if entry.get("alpha") is not None else None)
    return False, None


def points(sums: pd.DataFrame, runs: list | None = None) -> pd.DataFrame:
    """One row per run x policy of the runs that sweep alpha, policies that decide with alpha only:
    ``scenario``, ``substrate``, ``label``, ``seed``, ``alpha``, ``grid_kwh``, ``grid_vs_static_pct``
    (vs static in the same run; NaN without one), ``grid_vs_ref_kwh`` (vs the same seed, scenario and
    policy at ``ref_alpha``, the least alpha swept) and ``overrun_frac`` (NaN for a run without
    migrations). The scenario is ``sums["scenario"]`` when present, else the name of the run
    (``runs``, matched on ``run_dir``)."""
    params = alpha_params(sums)
    if not params or not len(sums):
        return pd.DataFrame()
    by_dir = {str(getattr(r, "path", "")): r for r in (runs or [])}
    is_static = (sums["policy"] if "policy" in sums.columns else sums["label"]).astype(str) == "static"
    static_kwh = (sums[is_static].groupby(sums.loc[is_static, "run_dir"].astype(str))["grid_kwh"].first()
                  if "run_dir" in sums.columns else pd.Series(dtype=float))
    rows = []
    for _, s in sums.iterrows():
        if all(pd.isna(s[c]) for c in params):
            continue  # a run of an input that does not sweep alpha (its alpha is fixed): not on a frontier
        run = by_dir.get(str(s.get("run_dir", "")))
        label = str(s["label"])
        steered, alpha = _policy_alpha(run, label) if run is not None else (False, None)
        own = param_column(f"policies[{label}].alpha")
        if alpha is None:
            candidates = [own, param_column("feasibility.alpha"), *params]
            alpha = next((float(s[c]) for c in candidates if c in sums.columns and pd.notna(s[c])), None)
            steered = steered or (own in sums.columns and pd.notna(s[own]))
        if alpha is None:
            continue  # a run of another input that does not sweep alpha
        scenario = s["scenario"] if "scenario" in sums.columns else getattr(run, "scenario", None)
        base = float(static_kwh.get(str(s.get("run_dir", "")), np.nan))
        # over the moves that had a window budget: a move on a grid signal (carbon, price) cannot overrun one
        migrations = float(s.get("migrations", np.nan)) - float(np.nan_to_num(float(s.get("migrations_without_window")
                                                                                       or 0)))
        overran = float(s.get("migrations_overran", np.nan))
        rows.append({"scenario": str(scenario or "?"), "substrate": str(s.get("substrate", "?")), "label": label,
                     "seed": s.get("seed"), "alpha": alpha, "steered": bool(steered),
                     "grid_kwh": float(s["grid_kwh"]),
                     "grid_vs_static_pct": 100.0 * (float(s["grid_kwh"]) / base - 1.0) if base and base > 0 else np.nan,
                     "overrun_frac": overran / migrations if migrations > 0 else np.nan,
                     "order": int(s["run"]) if "run" in sums.columns and pd.notna(s.get("run")) else len(rows)})
    p = pd.DataFrame(rows)
    if not len(p):
        return p
    swept = p.groupby(["scenario", "substrate"])["alpha"].transform("nunique") > 1
    p = p[swept & p["steered"]].reset_index(drop=True)
    ref_alpha = p.groupby(_KEY)["alpha"].transform("min")
    at_ref = p[np.isclose(p["alpha"], ref_alpha)].groupby([*_KEY, "seed"])["grid_kwh"].mean()
    ref = pd.Series([at_ref.get((r.scenario, r.substrate, r.label, r.seed), np.nan) for r in p.itertuples()],
                    index=p.index, dtype=float)
    first = p.groupby(["scenario", "substrate"])["order"].transform("min")  # the scenario's place in the inputs
    return p.assign(ref_alpha=ref_alpha, grid_vs_ref_kwh=p["grid_kwh"] - ref, order=first)


def frontier(p: pd.DataFrame) -> pd.DataFrame:
    """Per scenario, substrate, policy and alpha: seeds; the mean grid kWh, grid energy vs static in the
    same run (%, paired per seed; NaN without static) and overrun rate, each with its 95 % interval
    (``*_lo``/``*_hi``; equal to the mean for one seed; the :class:`Interval` itself in ``ci_*``); and
    ``order`` (the first run's number: the order the report was given its inputs)."""
    if not len(p):
        return pd.DataFrame()
    rows = []
    for (scen, sub, label, alpha), g in p.groupby([*_KEY, "alpha"], sort=True):
        row = {"scenario": scen, "substrate": sub, "label": label, "alpha": alpha, "seeds": len(g),
               "order": int(g["order"].min())}
        row["ref_alpha"] = float(g["ref_alpha"].iloc[0])
        for metric in ("grid_kwh", "grid_vs_static_pct", "grid_vs_ref_kwh", "overrun_frac"):
            iv = t_interval(g[metric])
            row.update({metric: iv.mean if iv else np.nan, f"{metric}_lo": iv.lo if iv else np.nan,
                        f"{metric}_hi": iv.hi if iv else np.nan, f"ci_{metric}": iv})
        rows.append(row)
    return pd.DataFrame(rows).sort_values(["order", "label", "alpha"]).reset_index(drop=True)


WITHIN_BUDGET = "least grid kWh within budget"
OVER_BUDGET = "none within budget: least overruns"


def choose(front: pd.DataFrame, budget_frac: float = OVERRUN_BUDGET_FRAC) -> pd.DataFrame:
    """Per scenario, substrate and policy: the alpha with the least mean grid energy among those whose
    mean overrun rate is at most ``budget_frac``; when none is, the alpha with the least mean overrun
    rate (then the least grid energy). ``rule`` says which (:data:`WITHIN_BUDGET`,
    :data:`OVER_BUDGET`); its frontier row beside. ``alpha`` NaN when no alpha has an overrun rate (no
    migrations). Every alpha of a sweep runs the same seeds (the same workloads), so the least mean
    is also the least mean paired difference."""
    rows = []
    for key, g in front.groupby(_KEY, sort=False):
        rated = g[g["overrun_frac"].notna()]
        ok = rated[rated["overrun_frac"] <= budget_frac + 1e-12]
        if len(ok):
            best = ok.sort_values(["grid_kwh", "overrun_frac", "alpha"]).iloc[0]
            rows.append({**best.to_dict(), "rule": WITHIN_BUDGET})
        elif len(rated):
            best = rated.sort_values(["overrun_frac", "grid_kwh", "alpha"]).iloc[0]
            rows.append({**best.to_dict(), "rule": OVER_BUDGET})
        else:
            rows.append({**dict(zip(_KEY, key)), "alpha": np.nan, "order": int(g["order"].min()),
                         "rule": "no migrations: no overrun rate"})
    return pd.DataFrame(rows)


def _ci(iv, scale: float = 1.0, fmt: str = "{:.4g}") -> str:
    if not isinstance(iv, Interval):
        return "-"
    if iv.n < 2:
        return f"{fmt.format(iv.mean * scale)} (1 seed)"
    return f"{fmt.format(iv.mean * scale)} [{fmt.format(iv.lo * scale)}, {fmt.format(iv.hi * scale)}]"


def _regret(p: pd.DataFrame, scen: str, sub: str, label: str, chosen: float, best: float) -> Interval | None:
    """Grid kWh at ``chosen`` minus at ``best`` alpha, paired per seed, on one scenario and policy."""
    g = p[(p["scenario"] == scen) & (p["substrate"] == sub) & (p["label"] == label)]
    at = {a: g[np.isclose(g["alpha"], a)].groupby("seed")["grid_kwh"].mean() for a in (chosen, best)}
    diff = (at[chosen] - at[best]).dropna()
    return t_interval(diff) if len(diff) else None


def out_of_sample(p: pd.DataFrame, budget_frac: float = OVERRUN_BUDGET_FRAC) -> pd.DataFrame:
    """Alpha chosen on the first scenario of each substrate (input order), judged on every other one:
    per policy swept in both, the chosen alpha and the rule that chose it (:func:`choose`), its grid kWh
    and overrun rate (%) on the judged scenario (mean [95 % CI]) and whether that rate is within the
    budget; the judged scenario's own choice by the same rule with the same; and ``regret_kwh``: grid
    kWh at the chosen alpha minus at the own choice, paired per seed (mean [95 % CI]). ``p`` from
    :func:`points`. Empty with fewer than two swept scenarios on a substrate."""
    front = frontier(p)
    if not len(front):
        return pd.DataFrame()
    chosen = choose(front, budget_frac)
    rows = []
    for sub, fs in front.groupby("substrate", sort=True):
        order = fs.groupby("scenario")["order"].min().sort_values().index.tolist()
        if len(order) < 2:
            continue
        first = order[0]
        for judged in order[1:]:
            both = set(fs.loc[fs["scenario"] == first, "label"]) & set(fs.loc[fs["scenario"] == judged, "label"])
            for label in sorted(both):
                def pick(scen: str) -> pd.Series:
                    return chosen[(chosen["scenario"] == scen) & (chosen["substrate"] == sub)
                                  & (chosen["label"] == label)].iloc[0]
                mine, own = pick(first), pick(judged)
                alpha = float(mine["alpha"])
                row = {"substrate": sub, "chosen_on": first, "judged_on": judged, "policy": label,
                       "chosen_alpha": alpha if np.isfinite(alpha) else "-", "chosen_by": mine["rule"],
                       "grid_kwh": "-", "overrun_pct": "-", "within_budget": "-"}
                there = fs[(fs["scenario"] == judged) & (fs["label"] == label) & np.isclose(fs["alpha"], alpha)]
                if np.isfinite(alpha) and not len(there):
                    row["grid_kwh"] = f"alpha {alpha:g} not swept on {judged}"
                elif len(there):
                    t = there.iloc[0]
                    row.update(grid_kwh=_ci(t["ci_grid_kwh"]), overrun_pct=_ci(t["ci_overrun_frac"], 100.0, "{:.3g}"),
                               within_budget=bool(pd.notna(t["overrun_frac"])
                                                  and t["overrun_frac"] <= budget_frac + 1e-12))
                has_best = pd.notna(own["alpha"])
                row.update(own_best_alpha=float(own["alpha"]) if has_best else "-", own_best_by=own["rule"],
                           own_best_grid_kwh=_ci(own["ci_grid_kwh"]) if has_best else "-",
                           own_best_overrun_pct=_ci(own["ci_overrun_frac"], 100.0, "{:.3g}") if has_best else "-",
                           regret_kwh=_ci(_regret(p, judged, sub, label, alpha, float(own["alpha"])))
                           if has_best and len(there) else "-")
                rows.append(row)
    return pd.DataFrame(rows)


def frontier_table(front: pd.DataFrame) -> pd.DataFrame:
    """The frontier for report.md: one row per scenario, substrate, policy and alpha."""
    if not len(front):
        return pd.DataFrame()
    return pd.DataFrame({"scenario": front["scenario"], "substrate": front["substrate"], "policy": front["label"],
                         "alpha": front["alpha"], "seeds": front["seeds"],
                         "grid_kwh": [_ci(iv) for iv in front["ci_grid_kwh"]],
                         "grid_vs_static_pct": [_ci(iv, 1.0, "{:+.3g}") for iv in front["ci_grid_vs_static_pct"]],
                         "grid_vs_least_alpha_kwh": [_ci(iv, 1.0, "{:+.3g}") for iv in front["ci_grid_vs_ref_kwh"]],
                         "overrun_pct": [_ci(iv, 100.0, "{:.3g}") for iv in front["ci_overrun_frac"]]})


def plot(front: pd.DataFrame, path: Path, budget_frac: float = OVERRUN_BUDGET_FRAC) -> Path:
    """Grid energy against overrun rate, one point per alpha (labelled) and policy, connected in alpha
    order, 95 % CIs both ways; one panel per scenario and substrate; the overrun budget dashed. The
    y axis is grid energy minus the same seed's at the least alpha swept (kWh, paired per seed, so
    that the seeds' different workloads cancel and the CIs show the effect of alpha alone)."""
    panels = front.drop_duplicates(["scenario", "substrate"])[["scenario", "substrate"]] if len(front) else front
    panels = list(panels.itertuples(index=False, name=None)) or [(None, None)]
    fig = Figure(figsize=(max(7.5, 6.6 * len(panels)), 5.6), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(panels), squeeze=False)).ravel()
    labels = sorted(set(front["label"])) if len(front) else []
    colours = {lb: f"C{i}" for i, lb in enumerate(labels)}
    for ax, (scen, sub) in zip(axes, panels):
        if scen is None:
            ax.text(0.5, 0.5, "no alpha sweep", ha="center", transform=ax.transAxes)
            continue
        part = front[(front["scenario"] == scen) & (front["substrate"] == sub)]
        y_col = "grid_vs_ref_kwh"
        for li, (label, g) in enumerate(part.groupby("label", sort=True)):
            g = g.sort_values("alpha")
            x, y = 100.0 * g["overrun_frac"].to_numpy(float), g[y_col].to_numpy(float)
            xerr = 100.0 * np.vstack([g["overrun_frac"] - g["overrun_frac_lo"],
                                      g["overrun_frac_hi"] - g["overrun_frac"]])
            yerr = np.vstack([g[y_col] - g[f"{y_col}_lo"], g[f"{y_col}_hi"] - g[y_col]])
            lo_n, hi_n = int(g["seeds"].min()), int(g["seeds"].max())
            ax.errorbar(x, y, xerr=np.nan_to_num(np.abs(xerr)), yerr=np.nan_to_num(np.abs(yerr)), marker="o", ms=6,
                        capsize=3, lw=1.3, color=colours[label],
                        label=f"{label} ({lo_n if lo_n == hi_n else f'{lo_n}-{hi_n}'} seeds per alpha)")
            for xi, yi, a in zip(x, y, g["alpha"]):
                if np.isfinite(xi) and np.isfinite(yi):
                    ax.annotate(f"α={a:g}", (xi, yi), textcoords="offset points", fontsize=8, color=colours[label],
                                xytext=(4, 6 if li % 2 == 0 else -13))  # policies alternate above/below
        ax.axvline(100.0 * budget_frac, color="black", ls="--", lw=1, label=f"overrun budget {100 * budget_frac:g} %")
        ax.set_xlabel("overruns per migration (%): mean over seeds, 95 % CI")
        ref = part["ref_alpha"].min()
        ax.set_ylabel(f"grid energy - the same seed's at α={ref:g} (kWh)\nmean over seeds, 95 % CI")
        ax.set_title(f"{scen} ({'simulation' if sub == 'sim' else f'emulation: {sub}'})", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="best")
    fig.suptitle("The alpha trade-off: grid energy against overruns, one point per alpha")
    return save_figure(fig, path, dpi=110)


def markdown(sums: pd.DataFrame, runs: list | None, out: Path | None = None,
             budget_frac: float = OVERRUN_BUDGET_FRAC) -> list[str]:
    """The report's section (nothing when no input sweeps alpha); the figure ``alpha_frontier.png`` in ``out``."""
    p = points(sums, runs)
    if not len(p):
        return []
    front = frontier(p)
    lines = ["## The alpha trade-off", "",
             "Each policy that decides with alpha, at each swept alpha: grid energy per run, the same vs static in "
             "the same run (%) and vs the same seed at the least alpha swept (kWh; both paired per seed, so that "
             "the seeds' workloads cancel), and overruns per migration (each run's `migrations_overran / "
             "migrations`): mean over seeds and 95 % t-interval. The figure plots the paired kWh. "
             "**Choice rule**: the alpha with the least mean "
             f"grid energy whose mean overrun rate is at most {100 * budget_frac:g} % (`OVERRUN_BUDGET_FRAC`); "
             "where no swept alpha keeps that budget, the alpha with the least overruns (said in `chosen_by`). "
             "Policies whose decisions take no alpha (static, energy_only) are left out: only the budget their "
             "migrations are judged against would move.", ""]
    if out is not None:
        plot(front, Path(out) / "alpha_frontier.png", budget_frac)
        lines += ["![alpha frontier](alpha_frontier.png)", ""]
    lines += [md_table(frontier_table(front)), ""]
    chosen = choose(front, budget_frac)
    none = pd.Series(None, index=chosen.index, dtype=object)  # no alpha had an overrun rate: no interval
    shown = pd.DataFrame({"scenario": chosen["scenario"], "substrate": chosen["substrate"], "policy": chosen["label"],
                          "chosen_alpha": [a if pd.notna(a) else "-" for a in chosen["alpha"]],
                          "chosen_by": chosen["rule"],
                          "grid_kwh": [_ci(iv) for iv in chosen.get("ci_grid_kwh", none)],
                          "overrun_pct": [_ci(iv, 100.0, "{:.3g}") for iv in chosen.get("ci_overrun_frac", none)]})
    lines += ["Alpha chosen on each scenario by itself (in sample):", "", md_table(shown), ""]
    oos = out_of_sample(p, budget_frac)
    if len(oos):
        lines += ["**Out of sample**: alpha chosen on the first scenario given, judged on the others beside their own "
                  "choice by the same rule (`within_budget`: the chosen alpha keeps the overrun budget there; "
                  "`regret_kwh`: grid kWh at the chosen alpha minus at the scenario's own choice, paired per seed):",
                  "", md_table(oos), ""]
    else:
        scen = ", ".join(sorted(set(front["scenario"])))
        lines += [f"**The choice cannot be validated out of sample**: only one scenario ({scen}) sweeps alpha here "
                  "(per substrate). Sweep the same alphas on another scenario, e.g. "
                  f"`testbed sweep {HOLDOUT_SWEEP}`, and give both sweeps to `testbed report`, the scenario "
                  "to choose on first.", ""]
    return lines
