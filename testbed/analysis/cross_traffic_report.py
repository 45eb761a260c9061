"""The report's section "Prediction error and overruns by predictor and load" (issue #33): for runs
whose migrations were predicted on more than one bandwidth basis (``predicted_bandwidth_basis``:
nominal, fair_share, probe) or that swept the cross-traffic load (``cross_traffic``), per substrate,
load and predictor: each run's median |transfer-time prediction error| and its overruns, then the
median over seeds and the mean's 95 % Student-t interval over seeds (:func:`testbed.stats.t_interval`),
and whether ``probe`` beats ``nominal`` under heavy load, paired per seed (:func:`testbed.stats.paired_test`),
judged as every claim is: over at least ``compare.MIN_SEEDS`` paired seeds, by the paired t-test.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from testbed.analysis.compare import MIN_SEEDS, SIGNIFICANCE, not_enough_seeds
from testbed.analysis.markdown import md_table, p_text
from testbed.analysis.names import param_column
from testbed.analysis.outcomes import outcome_s
from testbed.stats import paired_test, t_interval

LOAD = param_column("cross_traffic")
HEAVY = "heavy"


def _has_section(m: pd.DataFrame) -> bool:
    if not len(m) or "predicted_bandwidth_basis" not in m.columns:
        return False
    return m["predicted_bandwidth_basis"].nunique(dropna=True) > 1 or (LOAD in m.columns and m[LOAD].nunique() > 1)


def _scenarios(d: pd.DataFrame, scenario_of: dict | None) -> pd.Series | str:
    """Each row's scenario name by its run (``scenario_of``: run index -> name; ``-`` where unknown)."""
    if "run" not in d.columns:
        return "-"
    return d["run"].map(lambda r: (scenario_of or {}).get(r, "-"))


def per_run(m: pd.DataFrame, scenario_of: dict | None = None) -> pd.DataFrame:
    """One row per run (seed) and predictor, for the runs that swept the cross-traffic load or compared
    bases: scenario (``scenario_of[run]``, else ``-``), substrate, load, basis, seed, completed moves,
    the median |predicted / realised transfer time - 1| over them, overruns (Eq. 1's budget missed,
    probe time included)."""
    if not _has_section(m):
        return pd.DataFrame()
    bases = m.groupby("run")["predicted_bandwidth_basis"].transform("nunique") > 1
    swept = m[LOAD].notna() if LOAD in m.columns else pd.Series(False, index=m.index)
    d = m[(m["status"] == "completed") & (bases | swept)].copy()
    if not len(d):
        return pd.DataFrame()
    d["scenario"] = _scenarios(d, scenario_of)
    d["load"] = d[LOAD].where(d[LOAD].notna(), "as declared").astype(str) if LOAD in d.columns else "as declared"
    d["predictor"] = d["predicted_bandwidth_basis"].fillna("nominal").astype(str)
    actual = outcome_s(d, "transfer")
    d["abs_err"] = (pd.to_numeric(d["predicted_transfer_s"], errors="coerce") / actual - 1.0).abs()
    d["over"] = d["overran"].astype("boolean").fillna(False).astype(bool)
    rows = []
    for key, g in d.groupby(["scenario", "substrate", "load", "predictor", "run", "label", "seed"], sort=False,
                            dropna=False):
        e = g["abs_err"].dropna()
        rows.append({"scenario": key[0], "substrate": key[1], "load": key[2], "predictor": key[3], "run": key[4],
                     "seed": key[6],
                     "moves": len(g), "median_abs_err": float(e.median()) if len(e) else np.nan,
                     "overruns": int(g["over"].sum()), "overrun_frac": float(g["over"].mean())})
    return pd.DataFrame(rows)


def _load_order(load: str) -> tuple[int, str]:
    order = ("none", "light", "heavy", "bursty")
    return (order.index(load) if load in order else len(order), load)


def table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per scenario, substrate, load and predictor: seeds, moves, and for the per-run median |error| and the
    overruns per run: the median over seeds, the mean and its 95 % CI over seeds."""
    if not len(runs):
        return pd.DataFrame()
    out = []
    for (scen, sub, load, pred), g in runs.groupby(["scenario", "substrate", "load", "predictor"], sort=False):
        row = {"scenario": scen, "substrate": sub, "load": load, "predictor": pred, "seeds": int(g["seed"].nunique()),
               "moves": int(g["moves"].sum())}
        for col, name in (("median_abs_err", "abs_err"), ("overruns", "overruns")):
            x = g[col].dropna()
            ci = t_interval(x)
            row[f"median_{name}"] = float(x.median()) if len(x) else np.nan
            row[f"mean_{name}"] = ci.mean if ci else np.nan
            row[f"{name}_ci95"] = "-" if ci is None or ci.n < 2 else f"[{ci.lo:.3g}, {ci.hi:.3g}]"
        row["overrun_share"] = float(g["overruns"].sum() / g["moves"].sum()) if g["moves"].sum() else np.nan
        out.append(row)
    t = pd.DataFrame(out)
    preds = {"nominal": 0, "fair_share": 1, "probe": 2}
    t["_k"] = [(sc, s, _load_order(lo), preds.get(p, 9), p)
               for sc, s, lo, p in zip(t["scenario"], t["substrate"], t["load"], t["predictor"])]
    return t.sort_values("_k").drop(columns="_k").reset_index(drop=True)


def heavy_verdicts(runs: pd.DataFrame) -> list[str]:
    """Per scenario and substrate: does ``probe`` have a lower median |error| over seeds than ``nominal``
    under heavy load? Said plainly either way, with the paired test over the seeds both ran."""
    if not len(runs):
        return []
    lines = []
    for scen, sub in sorted(set(zip(runs["scenario"], runs["substrate"]))):
        h = runs[(runs["scenario"] == scen) & (runs["substrate"] == sub) & (runs["load"] == HEAVY)]
        where = f"{scen} on {sub}" if scen != "-" else sub
        nom = h[h["predictor"] == "nominal"].groupby("seed")["median_abs_err"].median().dropna()
        pro = h[h["predictor"] == "probe"].groupby("seed")["median_abs_err"].median().dropna()
        if not len(nom) or not len(pro):
            missing = " and ".join(f"`{p}`" for p, x in (("nominal", nom), ("probe", pro)) if not len(x))
            done = [(p, h[h["predictor"] == p]) for p in ("nominal", "probe")]
            said = "; ".join(f"`{p}` made {int(x['moves'].sum())} and {int(x['overruns'].sum())} overran"
                             for p, x in done if len(x))
            lines.append(f"- {where}: not judged: no completed heavy-load move by {missing} (a predictor that "
                         f"refuses every move has no error to compare){'; ' + said if said else ''}.")
            continue
        a, b = float(pro.median()), float(nom.median())
        common = pro.index.intersection(nom.index)
        test = paired_test(pro[common].to_numpy(), nom[common].to_numpy()) if len(common) else None
        tested = ("" if test is None else f"; paired over {test.n} seed{'s' if test.n != 1 else ''}, mean difference {test.mean_diff:+.3g}, "
                  f"Wilcoxon p = {p_text(test.wilcoxon_p)}, t-test p = {p_text(test.t_p)}")
        said = f"median |error| over seeds {a:.3g} (`probe`) against {b:.3g} (`nominal`){tested}"
        lines.append(f"- {where}: {heavy_verdict(test)}: {said}.")
    return lines


def heavy_verdict(test) -> str:
    """The verdict on "``probe`` beats ``nominal`` under heavy load" from the paired test of the per-seed
    median |errors| (probe - nominal), by the rule every claim here follows (:mod:`testbed.analysis.compare`):
    at least ``MIN_SEEDS`` paired seeds, and a difference only where the paired t-test finds one."""
    n = 0 if test is None else test.n
    if n < MIN_SEEDS:
        return f"**not judged**, {not_enough_seeds(n)} paired"
    if not test.t_p < SIGNIFICANCE:
        return "**no, `probe` does not beat `nominal` under heavy load** (no significant difference)"
    if test.mean_diff < 0:
        return "**yes, `probe` beats `nominal` under heavy load**"
    return "**no, `probe` does not beat `nominal` under heavy load** (`probe` is worse)"


    return lines


MOVE_KEY = ("scenario", "load", "seed", "label", "job_id", "src", "dst", "t_decision_s")
"""What makes a move on sim and one in emulation the same move: its run's scenario, load, seed and
policy, its job, path and decision time (the controller decides on forecasts, the same on both)."""


def transfer_gap(m: pd.DataFrame, scenario_of: dict | None = None) -> pd.DataFrame:
    """The sim-vs-emulation gap of transfer time under cross-traffic: per scenario, emulated substrate and
    load, the moves made on sim and in emulation alike (:data:`MOVE_KEY`), each one's realised transfer
    time in emulation (measured) / on sim (modelled), and over seeds the mean of each seed's median ratio
    with its 95 % Student-t interval. Empty where the load was not swept on sim and in emulation."""
    need = {"substrate", "seed", "label", "status", "job_id", "src", "dst", "t_decision_s"}
    if LOAD not in m.columns or not need <= set(m.columns) or "sim" not in set(m["substrate"]):
        return pd.DataFrame()
    d = m[(m["status"] == "completed") & m[LOAD].notna()].copy()
    if d["substrate"].nunique() < 2:
        return pd.DataFrame()
    d["scenario"] = _scenarios(d, scenario_of)
    d["load"] = d[LOAD].astype(str)
    d["t_decision_s"] = pd.to_numeric(d["t_decision_s"], errors="coerce").round(3)
    d["transfer_s"] = outcome_s(d, "transfer")
    d = d.dropna(subset=["transfer_s"])
    key = list(MOVE_KEY)
    sim = d[d["substrate"] == "sim"].drop_duplicates(key).set_index(key)["transfer_s"]
    rows = []
    for sub in sorted(set(d["substrate"]) - {"sim"}):
        emu = d[d["substrate"] == sub].drop_duplicates(key).set_index(key)["transfer_s"]
        both = emu.index.intersection(sim.index)
        if not len(both):
            continue
        ratio = (emu[both] / sim[both]).rename("ratio").reset_index()
        for (scen, load), g in ratio.groupby(["scenario", "load"], sort=False):
            per_seed = g.groupby("seed")["ratio"].median()
            ci = t_interval(per_seed)
            rows.append({"scenario": scen, "substrate": sub, "load": load, "seeds": int(per_seed.size),
                         "moves": len(g), "median_ratio": float(g["ratio"].median()),
                         "min_ratio": float(g["ratio"].min()), "max_ratio": float(g["ratio"].max()),
                         "mean_seed_ratio": ci.mean if ci else float(per_seed.mean()),
                         "seed_ratio_ci95": "-" if ci is None or ci.n < 2 else f"[{ci.lo:.3g}, {ci.hi:.3g}]"})
    if not rows:
        return pd.DataFrame()
    t = pd.DataFrame(rows)
    t["_k"] = [(sc, s, _load_order(lo)) for sc, s, lo in zip(t["scenario"], t["substrate"], t["load"])]
    return t.sort_values("_k").drop(columns="_k").reset_index(drop=True)


def markdown(m: pd.DataFrame, scenario_of: dict | None = None) -> list[str]:
    """The section's lines (none without runs that swept the load or compared bases); ``scenario_of``:
    run index -> scenario name, so that seeds pool only within one scenario and substrate."""
    runs = per_run(m, scenario_of)
    if not len(runs):
        return []
    return ["## Prediction error and overruns by predictor and load", "",
            "Cross-traffic (`cross_traffic`, docs/how-to/cross-traffic.md) degrades a link by other flows; the "
            "predictor assumes the link's rate (`nominal`), its fair share under the declared load (`fair_share`) "
            "or a probe of the path (`probe`, its time and bytes charged to the move). Per run: the median over its "
            "completed moves of |predicted / realised transfer time - 1| (`abs_err`), and its overruns (Eq. 1's budget missed, "
            "the probe's time included); then over seeds: the median, the mean and the mean's 95 % Student-t "
            "interval (`-` below two seeds); `overrun_share`: all overruns / all completed moves. On sim the realised time is the fair-share model's, so `fair_share` "
            "is exact there but for slow start and load changes during the move.", "",
            md_table(table(runs)), "", "Does `probe` beat `nominal` under heavy load?", "", *heavy_verdicts(runs), "",
            *_gap_lines(transfer_gap(m, scenario_of))]


def _gap_lines(gap: pd.DataFrame) -> list[str]:
    if not len(gap):
        return []
    return ["Sim vs emulation under cross-traffic: the moves both substrates made (the same run scenario, "
            "load, seed, policy, job, path and decision time), each one's transfer time in emulation "
            "(measured) / on sim (the fair-share model): their median, range, and the mean over seeds of "
            "each seed's median with its 95 % Student-t interval (`-` below two seeds). 1 is no gap.", "",
            md_table(gap), ""]
