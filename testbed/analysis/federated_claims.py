"""The PowerTrip paper's claims judged over seeds: ``testbed report`` on federated runs and sweeps.

Each federated run's ``comparison.json`` holds every policy's summary (time-to-accuracy, whether and
when it stopped). Runs are grouped by scenario, substrate and sweep cell (one group = one setting,
its seeds), and within a group by round-time clock. Nothing here is judged from one run.

**Censoring.** A run that stops (``max_rounds``, ``max_hours``) before reaching the target is right-
censored at its end, never dropped. Per policy the table gives reached-k-of-n, the Kaplan-Meier
median time-to-accuracy with its 95 % CI (``scipy.stats.ecdf``; log-log interval) and the restricted
mean time-to-accuracy up to a horizon ``tau``: the mean of ``min(T, tau)`` over seeds, where ``tau``
is ``max_hours`` or, if a run stopped earlier without reaching the target, the earliest such stop.
Below ``tau`` every run's ``min(T, tau)`` is known exactly (a censored run is at least ``tau``), so
the restricted mean, its Student-t CI and paired tests over seeds need no assumption about when a
censored run would have reached the target.

**Claims.** Per group and clock, PowerTrip's per-seed reduction ``1 - R_pt / R_base`` of the
restricted time (common ``tau`` of the runs compared), its mean and 95 % CI, the paired t and
Wilcoxon tests of ``R_pt`` against ``R_base``, and the verdict of :func:`testbed.analysis.compare.verdict`
(the one verdict rule of both studies). Baselines that are picked (the best static k; the weakest
baseline for "up to 50 %") are picked on other seeds than those they are judged on: seeds are split
in two folds by their order; each fold is judged against the choice made on the other fold
(2-fold cross-fitting), so every seed is judged once and no choice has seen the seeds it is judged on.
The choice ranks by the mean time-to-accuracy over that fold with a run that never reached the
target counted at ``max_hours``.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as sps

from testbed.analysis import compare as cmp
from testbed.analysis.federated_summary import PAPER
from testbed.analysis.markdown import ci_cells, md_table, p_text
from testbed.stats import paired_test, ratio_change_interval, t_interval
from testbed.analysis.figures import save as save_figure

PAPER_VS_BEST_STATIC_PCT = 100.0 * (1.0 - PAPER["powertrip_h"] / PAPER["static_best_h"])  # 0.65 h vs 1.16 h: 44 %
ENERGY_RESOLUTION_KWH = 1e-9  # below it an energy is rounding (a total minus its renewable part), read as 0
CLAIM_UP_TO = "PowerTrip: up to 50 % lower time-to-accuracy than the baselines (weakest baseline chosen on other seeds)"
CLAIM_BEST_STATIC = "PowerTrip vs the best static k (chosen on other seeds)"
CLAIM_K70 = "PowerTrip vs static k = 70 (the paper's best k)"


def is_federated(run) -> bool:
    return bool((run.resolved or {}).get("federated"))


@dataclass(frozen=True)
class Censored:
    """Time-to-accuracy (h) of one policy over seeds: ``tta_h`` NaN where the run stopped at ``end_h``
    without reaching the target (right-censored there)."""

    seeds: np.ndarray
    tta_h: np.ndarray
    end_h: np.ndarray
    energy_kwh: np.ndarray | None = None  # the run's energy and grid energy: up to the target, or its stop
    grid_kwh: np.ndarray | None = None

    @property
    def reached(self) -> np.ndarray:
        return np.isfinite(self.tta_h)

    def horizon_h(self, max_h: float) -> float:
        """``max_hours``, or the earliest stop of a run that did not reach the target."""
        stops = self.end_h[~self.reached]
        return float(min(max_h, stops.min())) if stops.size else float(max_h)

    def restricted_h(self, tau_h: float) -> np.ndarray:
        """``min(T, tau)`` per seed: exact when ``tau`` is at most every censored run's stop."""
        return np.minimum(np.where(self.reached, self.tta_h, np.inf), tau_h)

    def ranked_h(self, max_h: float) -> float:
        """The choice rule's score: mean time-to-accuracy, a run that never reached the target at ``max_h``."""
        return float(np.mean(np.where(self.reached, np.minimum(self.tta_h, max_h), max_h)))

    def take(self, mask: np.ndarray) -> "Censored":
        return Censored(self.seeds[mask], self.tta_h[mask], self.end_h[mask],
                        None if self.energy_kwh is None else self.energy_kwh[mask],
                        None if self.grid_kwh is None else self.grid_kwh[mask])


def km_median(c: Censored, level: float = 0.95) -> tuple[float, float, float]:
    """Kaplan-Meier median time-to-accuracy (h) and its ``level`` CI (log-log interval of the
    survival function, Brookmeyer-Crowley style: where its bounds cross 1/2); inf where not reached."""
    if not c.reached.any():
        return math.inf, math.inf, math.inf
    data = sps.CensoredData(uncensored=c.tta_h[c.reached], right=c.end_h[~c.reached])
    sf = sps.ecdf(data).sf
    times = np.asarray(sf.quantiles, dtype=float)
    with warnings.catch_warnings():  # undefined where the curve is 0 or 1: NaN, read as "not below 1/2"
        warnings.filterwarnings("ignore", message="The confidence interval is undefined")
        ci = sf.confidence_interval(level, method="log-log")

    def first_below_half(p: np.ndarray) -> float:
        hit = np.flatnonzero(np.nan_to_num(p, nan=1.0) <= 0.5)
        return float(times[hit[0]]) if hit.size else math.inf

    # the median's lower limit: where the lower band first reaches 1/2; its upper: where the upper band does
    return (first_below_half(sf.evaluate(times)), first_below_half(ci.low.evaluate(times)),
            first_below_half(ci.high.evaluate(times)))


def _policies(runs: list, comps: list) -> dict[tuple, dict]:
    """(scenario, substrate, cell) -> {"max_h", "clocks": {clock: {label: Censored}}, "static": {label: k},
    "powertrip": {clock: the first PowerTrip label}, "variants": every PowerTrip label, "untrained": the
    labels that trained no round on any seed}, seeds in ascending order (the same for every label of a group)."""
    rows: dict[tuple, list[tuple[int, float, dict]]] = {}
    for run, comp in zip(runs, comps):
        if not is_federated(run) or not comp:
            continue
        max_h = float(run.resolved["federated"]["max_hours"])
        rows.setdefault((run.scenario, run.substrate, run.cell), []).append((run.seed, max_h, comp["policies"]))
    out = {}
    for key, per_seed in sorted(rows.items()):
        per_seed.sort(key=lambda x: x[0])
        labels = [lb for lb, s in per_seed[0][2].items() if not s.get("best_of")]
        labels = [lb for lb in labels if all(lb in p for _, _, p in per_seed)]  # every seed ran it
        group = {"max_h": min(m for _, m, _ in per_seed), "clocks": {}, "static": {}, "powertrip": {},
                 "variants": set(), "policy": {}, "untrained": set()}
        seeds = np.array([s for s, _, _ in per_seed], dtype=int)
        for lb in labels:
            first = per_seed[0][2][lb]
            clock = first.get("round_time") or "straggler"
            tta = np.array([_h(p[lb].get("time_to_accuracy_s")) / 3600.0 if p[lb].get("reached") else np.nan
                            for _, _, p in per_seed])  # hours, as the paper's
            end = np.array([_h(p[lb].get("end_time_s")) / 3600.0 for _, _, p in per_seed])
            kwh = {k: np.array([_h(p[lb].get(k)) for _, _, p in per_seed]) for k in ("energy_kwh", "grid_kwh")}
            group["clocks"].setdefault(clock, {})[lb] = Censored(seeds, tta, end, kwh["energy_kwh"], kwh["grid_kwh"])
            group["policy"][lb] = str(first.get("policy"))
            rounds = [p[lb].get("rounds_trained") for _, _, p in per_seed]
            if all(r is not None and r == 0 for r in rounds):  # e.g. a radius that covers no site
                group["untrained"].add(lb)
            if first.get("policy") == "static_k" and first.get("k") is not None:
                group["static"][lb] = int(first["k"])
            if first.get("policy") == "powertrip":
                group["powertrip"].setdefault(clock, lb)
                group["variants"].add(lb)  # other PowerTrip variants (gain, patience) are not baselines
        out[key] = group
    return out


def _h(x) -> float:
    return float(x) if x is not None and math.isfinite(float(x)) else math.nan


def _folds(n: int) -> np.ndarray:
    """Fold of each of ``n`` seeds (in seed order): 0, 1, 0, 1, ..."""
    return np.arange(n) % 2


def _judged(bases: list[Censored]) -> Censored:
    """The baseline judged at each seed: ``bases[i]`` (a Censored of all seeds) gives seed ``i``."""
    def pick(field: str) -> np.ndarray:
        return np.array([getattr(b, field)[i] if getattr(b, field) is not None else np.nan
                         for i, b in enumerate(bases)])
    return Censored(bases[0].seeds, pick("tta_h"), pick("end_h"), pick("energy_kwh"), pick("grid_kwh"))


def _judge(pt: Censored, bases: list[Censored], max_h: float, paper: float) -> dict:
    """PowerTrip against a baseline per seed (``bases[i]`` is the baseline run judged at seed ``i``)."""
    n = len(pt.seeds)
    base = _judged(bases)
    tau = min(pt.horizon_h(max_h), base.horizon_h(max_h))
    r_pt, r_b = pt.restricted_h(tau), base.restricted_h(tau)
    red = 100.0 * (1.0 - r_pt / r_b)
    ci, test = t_interval(red), paired_test(r_pt, r_b)
    return {"tau_h": tau, "n": n, "reached_pt": int(pt.reached.sum()), "reached_base": int(base.reached.sum()),
            "ci": ci, "test": test, "verdict": cmp.verdict(ci, test, paper, against="the baseline")}


def _energy_effect(pt: Censored, bases: list[Censored], max_h: float, metric: str) -> dict:
    """PowerTrip's change (%) of ``metric`` (energy or grid energy of the run: up to the target, or up
    to max_hours for a run that did not reach it) against the baseline judged at each seed: the change
    of the mean over seeds with its paired bootstrap CI (:func:`testbed.stats.ratio_change_interval`;
    a t-interval of per-seed changes could fall below -100 %, and a seed whose baseline used none has
    no per-seed change), and paired tests of the energies.
    Comparable only where every run compared ended at the target or at max_hours (none stopped
    earlier): then each is the energy to min(T, max_hours), a restricted energy-to-accuracy."""
    n = len(pt.seeds)
    base = _judged(bases)
    a, b = (np.where(np.abs(x) < ENERGY_RESOLUTION_KWH, 0.0, x) for x in (getattr(pt, metric), getattr(base, metric)))
    ok = (pt.reached | (pt.end_h >= max_h - 1e-9)) & (base.reached | (base.end_h >= max_h - 1e-9))
    reached = f"{int(pt.reached.sum())}/{n} / {int(base.reached.sum())}/{n}"
    if not ok.all():
        return {"n": n, "reached": reached, "ci": None, "test": None,
                "verdict": "not comparable (a run stopped before max_hours without reaching the target)"}
    ci, test = ratio_change_interval(a, b), paired_test(a, b)
    if ci is None or ci.n < n:  # the baselines used none of it over these seeds: no relative change
        used = "neither used any" if not np.nansum(a) > 0 else "the baselines used none"
        return {"n": n, "reached": reached, "ci": None, "test": None,
                "verdict": f"not measured ({used}: no relative change)"}
    return {"n": n, "reached": reached, "ci": ci, "test": test,
            "verdict": cmp.effect_verdict(ci, test, against="the baseline")}


def _cross_fit(pt: Censored, candidates: dict[str, Censored], max_h: float, pick) -> tuple[list[Censored], list[str]]:
    """Per seed, the candidate ``pick`` chooses on the other fold's seeds (and the labels chosen per fold)."""
    folds = _folds(len(pt.seeds))
    chosen_per_fold = {}
    for f in (0, 1):
        other = folds != f
        chosen_per_fold[f] = pick({lb: c.take(other) for lb, c in candidates.items()}, pt.take(other), max_h)
    per_seed = [candidates[chosen_per_fold[int(f)]] for f in folds]
    return per_seed, [chosen_per_fold[0], chosen_per_fold[1]]


def _fastest(cands: dict[str, Censored], pt: Censored, max_h: float) -> str:
    return min(cands, key=lambda lb: (cands[lb].ranked_h(max_h), lb))


def _weakest(cands: dict[str, Censored], pt: Censored, max_h: float) -> str:
    def gain(lb: str) -> float:  # PowerTrip's mean reduction against it, the choice rule's times
        b = cands[lb].ranked_h(max_h)
        return 1.0 - pt.ranked_h(max_h) / b if b > 0 else -math.inf
    return max(cands, key=lambda lb: (gain(lb), lb))


def claims_table(runs: list, comparisons: list) -> pd.DataFrame:
    """``comparisons[i]``: the federated comparison.json of ``runs[i]`` (None where there is none)."""
    return _claims(_policies(runs, comparisons))


def _claims(groups: dict[tuple, dict]) -> pd.DataFrame:
    rows = []
    for (scenario, substrate, cell), g in groups.items():
        for clock, pols in g["clocks"].items():
            pt_label = g["powertrip"].get(clock)
            if pt_label is None:
                continue
            pt, max_h = pols[pt_label], g["max_h"]
            where = {"scenario": scenario, "substrate": substrate, "cell": cell or "-", "clock": clock}
            # a policy that trained no round on any seed is no baseline: PowerTrip would "beat" it by construction
            baselines = {lb: c for lb, c in pols.items() if lb not in g["variants"] and lb not in g["untrained"]}
            statics = {lb: c for lb, c in baselines.items() if lb in g["static"]}
            k70 = next((lb for lb in statics if g["static"][lb] == PAPER["static_best_k"]), None)
            todo = []
            if len(pt.seeds) >= 2 and baselines:
                per_seed, chosen = _cross_fit(pt, baselines, max_h, _weakest)
                todo.append((CLAIM_UP_TO, PAPER["max_reduction_pct"], per_seed, chosen))
            if len(pt.seeds) >= 2 and statics:
                per_seed, chosen = _cross_fit(pt, statics, max_h, _fastest)
                todo.append((CLAIM_BEST_STATIC, PAPER_VS_BEST_STATIC_PCT, per_seed, chosen))
            if k70:
                todo.append((CLAIM_K70, PAPER_VS_BEST_STATIC_PCT, [statics[k70]] * len(pt.seeds), [k70, k70]))
            energy_todo = [t for t in todo if t[0] in (CLAIM_BEST_STATIC, CLAIM_K70)]
            for claim, paper, per_seed, chosen in todo:
                j = _judge(pt, per_seed, max_h, paper)
                rows.append({"claim": claim, "paper": f"{paper:+.0f} %", **where, "seeds": j["n"],
                             "baseline (fold A / fold B)": " / ".join(dict.fromkeys(chosen)),
                             "reached (PowerTrip / baseline)": f"{j['reached_pt']}/{j['n']} / {j['reached_base']}/{j['n']}",
                             "horizon tau h": round(j["tau_h"], 3), **ci_cells(j["ci"], "%"),
                             "paired test (t p / Wilcoxon p)": _ps(j["test"]), "verdict": j["verdict"]})
            for claim, _, per_seed, chosen in energy_todo:
                for metric, what in (("energy_kwh", "energy"), ("grid_kwh", "grid energy")):
                    e = _energy_effect(pt, per_seed, max_h, metric)
                    rows.append({"claim": f"{claim.split(' (')[0]}: {what} to the target (no paper number)", "paper": "-",
                                 **where, "seeds": e["n"],
                                 "baseline (fold A / fold B)": " / ".join(dict.fromkeys(chosen)),
                                 "reached (PowerTrip / baseline)": e["reached"], "horizon tau h": round(max_h, 3),
                                 **ci_cells(e["ci"], "%"), "paired test (t p / Wilcoxon p)": _ps(e["test"]),
                                 "verdict": e["verdict"]})
            if not todo:
                rows.append({"claim": CLAIM_BEST_STATIC, "paper": f"{PAPER_VS_BEST_STATIC_PCT:+.0f} %", **where,
                             "seeds": len(pt.seeds), "verdict": cmp.not_enough_seeds(len(pt.seeds))})
    return pd.DataFrame(rows)


def policy_table(runs: list, comparisons: list) -> pd.DataFrame:
    """Per group, clock and policy: reached-k-of-n, the Kaplan-Meier median and the restricted mean
    time-to-accuracy over seeds (censored runs counted)."""
    return _policy_rows(_policies(runs, comparisons))


def _policy_rows(groups: dict[tuple, dict]) -> pd.DataFrame:
    rows = []
    for (scenario, substrate, cell), g in groups.items():
        for clock, pols in g["clocks"].items():
            tau = min(c.horizon_h(g["max_h"]) for c in pols.values())  # one horizon for the whole clock
            for lb, c in pols.items():
                med, lo, hi = km_median(c)
                ci = t_interval(c.restricted_h(tau))
                rows.append({"scenario": scenario, "substrate": substrate, "cell": cell or "-", "clock": clock,
                             "policy": lb, "seeds": len(c.seeds), "reached": f"{int(c.reached.sum())}/{len(c.seeds)}",
                             "KM median h": _hours(med), "KM median 95 % CI h": f"[{_hours(lo)}, {_hours(hi)}]",
                             "horizon tau h": round(tau, 3), "restricted mean h": _hours(ci.mean),
                             "restricted mean 95 % CI h": "-" if ci.n < 2 else f"[{ci.lo:.3f}, {ci.hi:.3f}]",
                             "energy kWh (mean)": _kwh(c.energy_kwh), "grid kWh (mean)": _kwh(c.grid_kwh)})
    return pd.DataFrame(rows)


def _kwh(x) -> str:
    v = None if x is None else x[np.isfinite(x)]
    return "-" if v is None or not v.size else f"{v.mean():.2f}"


def _hours(x: float) -> str:
    return "not reached" if not math.isfinite(x) else f"{x:.3f}"


def _ps(test) -> str:
    if test is None or not math.isfinite(test.t_p):
        return "-"
    return f"{p_text(test.t_p)} / {p_text(test.wilcoxon_p)}"


KM_COLOURS = {"powertrip": "C3", "best": "C0", "k70": "C2", "random": "C1", "fixed_radius": "C4", "centralized": "C7"}
VARIANT_COLOURS = ("C5", "C6", "C8", "C9")  # PowerTrip's other variants in one group (gain, patience): none of the above


def km_figures(runs: list, comparisons: list, out) -> list[str]:
    return _km_figures(_policies(runs, comparisons), out)


def _km_figures(groups: dict[tuple, dict], out) -> list[str]:
    """Per scenario, substrate and cell: the fraction of seeds that reached the target by each time
    (1 - Kaplan-Meier survival, 95 % log-log band), one panel per clock, at most six policies each, in
    this order: PowerTrip, its other variants in the group (the gain or patience a sweep compares), the
    fastest static k over these seeds (by the choice rule), static k = 70, random, fixed radius,
    centralized. The legend sits below the panel, off the curves. Returns the figures' file names."""
    from matplotlib.figure import Figure

    from testbed.analysis.params import file_stem

    names = []
    for (scenario, substrate, cell), g in groups.items():
        clocks = [c for c in g["clocks"] if g["powertrip"].get(c)]
        if not clocks:
            continue
        fig = Figure(figsize=(6 * len(clocks), 5.2), layout="constrained")  # the title's two lines fit one panel
        for j, clock in enumerate(clocks):
            ax = fig.add_subplot(1, len(clocks), j + 1)
            pols, max_h = g["clocks"][clock], g["max_h"]
            statics = [lb for lb in pols if lb in g["static"]]
            best = _fastest({lb: pols[lb] for lb in statics}, pols[g["powertrip"][clock]], max_h) if statics else None
            k70 = next((lb for lb in statics if g["static"][lb] == PAPER["static_best_k"] and lb != best), None)
            pick = [(g["powertrip"][clock], "powertrip", "")]
            variants = sorted(lb for lb in pols if lb in g["variants"] and lb != g["powertrip"][clock])
            pick += [(lb, f"variant{i}", "") for i, lb in enumerate(variants[:len(VARIANT_COLOURS)])]
            pick += [(best, "best", " (fastest static k here)")] if best else []
            pick += [(k70, "k70", " (static k = 70)")] if k70 else []
            for role in ("random", "fixed_radius", "centralized"):
                lb = next((x for x in pols if g["policy"].get(x) == role), None)
                pick += [(lb, role, "")] if lb else []
            right = 0.0
            for lb, role, note in pick[:6]:
                _km_line(ax, pols[lb], max_h, KM_COLOURS.get(role) or VARIANT_COLOURS[int(role[7:])], f"{lb}{note}")
                c = pols[lb]  # the time axis ends where the last curve stops changing
                right = max(right, max_h if not c.reached.all() else float(np.nanmax(c.tta_h)))
            ax.set_xlim(0, min(max_h, 1.1 * right) if right > 0 else max_h)
            ax.set_ylim(0, 1.02)
            ax.set_xlabel("scenario time (h)")
            ax.set_ylabel("fraction of seeds at the target")
            ax.set_title(f"{clock} clock", fontsize=9)
            ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False)  # off the curves
        fig.suptitle(f"Time-to-accuracy on {substrate}{' in cell ' + cell if cell else ''} over "
                     f"{len(next(iter(g['clocks'].values()))[g['powertrip'][clocks[0]]].seeds)} seeds "
                     "\n(Kaplan-Meier, 95 % band; censored runs counted)", fontsize=9)
        name = f"tta_km_{file_stem(f'{scenario}_{substrate}_{cell}')}.png"
        save_figure(fig, out / name, dpi=110)
        names.append(name)
    return names


def _km_line(ax, c: Censored, max_h: float, colour: str, label: str) -> None:
    if not c.reached.any():
        ax.plot([0, max_h], [0, 0], color=colour, lw=1.3, label=f"{label}: none reached")
        return
    sf = sps.ecdf(sps.CensoredData(uncensored=c.tta_h[c.reached], right=c.end_h[~c.reached])).sf
    t = np.concatenate([[0.0], np.asarray(sf.quantiles, dtype=float), [max_h]])
    t = np.unique(np.clip(t, 0, max_h))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The confidence interval is undefined")
        band = sf.confidence_interval(0.95, method="log-log")
    y = 1 - sf.evaluate(t)
    ax.step(t, y, where="post", color=colour, lw=1.4, label=f"{label}: {int(c.reached.sum())}/{len(c.seeds)}")
    lo, hi = 1 - band.high.evaluate(t), 1 - band.low.evaluate(t)
    ok = np.isfinite(lo) & np.isfinite(hi)  # undefined where the curve is 0 or 1: no band there
    ax.fill_between(t, np.where(ok, lo, y), np.where(ok, hi, y), step="post", color=colour, alpha=0.1, lw=0)


def markdown(runs: list, comparisons: list, out=None) -> list[str]:
    groups = _policies(runs, comparisons)  # read once for the tables and the figures
    table = _claims(groups)
    if table.empty:
        return []
    figures = _km_figures(groups, out) if out is not None else []
    untrained = [f"`{lb}` ({scenario}, {substrate}{', cell ' + cell if cell else ''})"
                 for (scenario, substrate, cell), g in groups.items() for lb in sorted(g["untrained"])]
    left_out = ([f"Left out as baselines, as they trained no round on any seed (no site was ever selected): "
                 f"{', '.join(untrained)}.", ""] if untrained else [])
    return ["## The PowerTrip paper's claims, over seeds", "",
            "Time-to-accuracy per policy over seeds, per scenario, substrate, sweep cell and round-time clock. A run "
            "that stopped before reaching the target is censored at its stop, never dropped: `reached` counts the "
            "runs that reached it; the Kaplan-Meier median (95 % CI) and the restricted mean up to the horizon "
            "`tau` (max_hours, or the earliest stop of a run that missed the target; min(T, tau) is known exactly "
            "for every run) count the others.", "",
            md_table(_policy_rows(groups)), "",
            *[line for f in figures for line in (f"![time-to-accuracy over seeds]({f})", "")],
            "PowerTrip's reduction per seed, 1 - R_PowerTrip / R_baseline of the restricted times (common tau of the "
            "runs compared): the mean, its 95 % Student-t CI, paired tests of the restricted times, and the verdict: "
            f"**reproduced**: at least {cmp.MIN_SEEDS} seeds, the paper's number inside the CI and a significant "
            f"difference (paired t p < {cmp.SIGNIFICANCE:g}); **same direction**: significant, the paper's sign, the "
            "CI misses its number; **not reproduced**: no significant difference, or the opposite sign. "
            "Energy rows (no paper number): the change of PowerTrip's mean energy and grid energy over seeds (each run "
            "ends at the target or at max_hours, so it is the energy to min(T, max_hours)) against the same baseline's, "
            "with a paired bootstrap 95 % CI (BCa) and paired tests; **lower/higher than the baseline** where "
            "significant; **not measured** where the baselines used none (no relative change). "
            "A baseline that is chosen (the best static k, the weakest baseline for 'up to') is chosen on the other half of the "
            "seeds (2-fold cross-fitting: seeds alternate between folds A and B in seed order), never on the seeds "
            "it is judged on. The paper's hours (EMNIST, its testbed) are not comparable with ours; the relative "
            "reductions are.", "",
            *left_out,
            md_table(table), ""]
