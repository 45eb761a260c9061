"""Per-run summaries of the PowerTrip study (pure: tables in, dicts/markdown out). A run reports
numbers only; whether a claim holds is judged over seeds by the report (federated_claims).

time-to-accuracy, the same for every policy: the first evaluation (end of a round: a FedAvg round,
or one epoch of the centralized baseline) whose test accuracy reaches the target. By default
(``federated.time_to_accuracy: end_of_round``) the time is the end of that round, what a real system
can know; ``interpolated`` places it linearly inside the round between the accuracy before and after
(which credits long rounds). Energy-to-accuracy: the energy spent up to that time, the same way. A
run that stops (max_rounds, max_hours) without reaching the target has no time-to-accuracy: it is
censored at its end (``end_time_s``), and the report counts it as such.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from testbed.analysis.summary import SIGNAL_COLUMNS  # one list for both studies: co2_kg, grid_cost

PAPER = {
    "max_reduction_pct": 50.0,                       # "up to 50% lower time-to-accuracy"
    "powertrip_h": 0.65, "static_best_h": 1.16,      # EMNIST 45 % target, static k = 70
    "static_best_k": 70,
}


# The numeric columns a federated run's ``summary.json`` can hold (what a sweep's ``metrics:`` may name):
# :func:`summarize_rounds`'s, :func:`energy_summary`'s and those the study adds (testbed/studies/federated.py:
# wall_s, samples_per_s; k for a static_k run; comm_measured_over_modelled where exchanges were measured).
# Not: label, policy, round_time (text), reached (boolean), tta_h_at and energy_kwh_by_site (objects).
# tests/unit/test_summary_metrics.py checks them against docs/outputs.md and a run's summary.json.
# written only where the exchange was measured (netns): comm_gap_summary and transfer_summary
MEASURED_EXCHANGE_METRICS: tuple[str, ...] = (
    "comm_measured_over_modelled", "comm_round_ratio_median", "comm_round_ratio_p10", "comm_round_ratio_p90",
    "comm_rounds_within_10pct", "comm_rounds_measured", "comm_transfer_ratio_median", "transfers",
    "transfer_over_shaped_median", "transfer_over_shaped_p90", "transfer_round_over_shaped_median",
    "transfer_rounds_within_10pct", "transfer_connect_s_median", "transfer_verify_s_median",
)
SUMMARY_METRICS: tuple[str, ...] = (
    "target_accuracy", "time_to_accuracy_s", "rounds_to_accuracy",
    "epoch_equivalents_to_accuracy", "energy_to_accuracy_kwh", "accuracy_per_kwh", "rounds", "rounds_trained",
    "final_accuracy", "best_accuracy", "end_time_s", "mean_k", "mean_round_s", "mean_compute_s", "mean_comm_s",
    "compute_over_comm", "projected_vs_measured_mae",
    "formula_vs_measured_mae", "projected_vs_measured_corr",
    "energy_kwh", "renewable_kwh", "grid_kwh", "compute_kwh", "comm_kwh", "idle_kwh",
    "wall_s", "samples_per_s", "k",
) + SIGNAL_COLUMNS + MEASURED_EXCHANGE_METRICS
COMM_TOLERANCE = 0.10  # a round's measured exchange "matches the shaped links" within this fraction of the model


TTA_MODES = ("end_of_round", "interpolated")


def _crossing(rounds: pd.DataFrame, target: float, mode: str = "end_of_round") -> tuple[int, float] | None:
    """(row position, fraction of that round) where the accuracy first reaches ``target``: the whole
    round (end_of_round), or linearly interpolated between the accuracy before and after it; None if never."""
    if mode not in TTA_MODES:
        raise ValueError(f"time-to-accuracy mode {mode!r}: expected one of {TTA_MODES}")
    acc = rounds["accuracy"].to_numpy(dtype=float)
    hits = np.flatnonzero(acc >= target)
    if not len(hits):
        return None
    i = int(hits[0])
    before = float(rounds["accuracy_before"].iloc[i])
    if before >= target:  # reached before this round (the initial model): no time spent on it
        return i, 0.0
    if mode == "end_of_round" or acc[i] <= before:
        return i, 1.0
    return i, (target - before) / (acc[i] - before)


def time_to_accuracy_s(rounds: pd.DataFrame, target: float, mode: str = "end_of_round") -> float:
    c = _crossing(rounds, target, mode)
    if c is None:
        return math.nan
    i, f = c
    return float(rounds["t_start_s"].iloc[i] + f * rounds["round_s"].iloc[i])


def energy_to_accuracy_kwh(rounds: pd.DataFrame, target: float, mode: str = "end_of_round") -> float:
    c = _crossing(rounds, target, mode)
    if c is None or "energy_kwh" not in rounds:
        return math.nan
    i, f = c
    e = rounds["energy_kwh"].to_numpy(dtype=float)
    return float(e[:i].sum() + f * e[i])


PHASE_COLUMNS = ("compute_kwh", "comm_kwh", "idle_kwh")  # energy_kwh split by what the site was doing


def energy_summary(sites: pd.DataFrame) -> dict:
    """Energy of the run (kWh): total, renewable, grid, by phase (compute, communication, idle), and per site."""
    cols = ("energy_kwh", "renewable_kwh", "grid_kwh")
    phases = [c for c in PHASE_COLUMNS if c in sites]  # compute, communication, idle (absent before they were split)
    if not len(sites) or "energy_kwh" not in sites:
        return {"energy_kwh": 0.0, "renewable_kwh": 0.0, "grid_kwh": 0.0, **{c: 0.0 for c in PHASE_COLUMNS},
                "energy_kwh_by_site": {}}
    per = sites.groupby("site", sort=False)[list(cols)].sum()
    signals = {k: float(sites[k].sum(skipna=True)) for k in SIGNAL_COLUMNS            # where the scenario has
               if k in sites.columns and sites[k].notna().any()}                      # carbon / price traces
    return {**{c: float(sites[c].sum()) for c in (*cols, *phases)}, **signals,
            "energy_kwh_by_site": {str(site): {"total": float(r["energy_kwh"]),
                                               "renewable": float(r["renewable_kwh"]),
                                               "grid": float(r["grid_kwh"])} for site, r in per.iterrows()}}


def _round_ratios(rows: pd.DataFrame, measured: str, modelled: str) -> pd.Series:
    """Per round, ``measured`` summed over its rows over ``modelled`` summed (rounds whose model is 0 left out)."""
    per_round = rows.groupby("round", sort=True)[[measured, modelled]].sum()
    return (per_round[measured] / per_round[modelled])[per_round[modelled] > 0]


def _share_within(ratio: pd.Series) -> float:
    """The share of ratios within :data:`COMM_TOLERANCE` of 1."""
    return float(((ratio - 1.0).abs() <= COMM_TOLERANCE).mean())


def comm_gap_summary(sites: pd.DataFrame) -> dict:
    """Measured against modelled exchange times, where the exchange was measured (netns): per round,
    the round's measured down + up seconds over its modelled ones (the link model: latency +
    8 x bytes / the link's rate at the round start, what the shaped links were set to), summed over
    its sites; per transfer, each direction's own ratio. Empty where nothing was measured (sim)."""
    if not len(sites) or "comm_measured" not in sites or not sites["comm_measured"].astype(bool).any():
        return {}
    m = sites[sites["comm_measured"].astype(bool)].assign(measured_s=lambda d: d["down_s"] + d["up_s"],
                                                         modelled_s=lambda d: d["predicted_down_s"] + d["predicted_up_s"])
    ratio = _round_ratios(m, "measured_s", "modelled_s")
    transfers = pd.concat([m["down_s"] / m["predicted_down_s"], m["up_s"] / m["predicted_up_s"]])
    transfers = transfers[np.isfinite(transfers)]
    if not len(ratio):
        return {}
    return {"comm_measured_over_modelled": float(m["measured_s"].sum() / m["modelled_s"].sum()),
            "comm_round_ratio_median": float(ratio.median()),
            "comm_round_ratio_p10": float(ratio.quantile(0.1)), "comm_round_ratio_p90": float(ratio.quantile(0.9)),
            "comm_rounds_within_10pct": _share_within(ratio),
            "comm_rounds_measured": int(len(ratio)),
            "comm_transfer_ratio_median": float(transfers.median()) if len(transfers) else math.nan}


def transfer_summary(transfers: pd.DataFrame) -> dict:
    """The real transfers of a run (netns; ``transfers.parquet``): how their data phase compares with
    the shaped link (bytes x 8 / the rate the link was set to, plus one round trip), per transfer and
    per round (summed over the round's transfers), and what connecting and verifying add, in wall
    seconds. Empty where nothing was sent."""
    if not len(transfers) or "shaped_transfer_s" not in transfers:
        return {}
    shaped = transfers["shaped_transfer_s"]
    ratio = (transfers["transfer_s"] / shaped)[shaped > 0]
    rounds = _round_ratios(transfers, "transfer_s", "shaped_transfer_s")
    return {"transfers": int(len(transfers)),
            "transfer_over_shaped_median": float(ratio.median()) if len(ratio) else math.nan,
            "transfer_over_shaped_p90": float(ratio.quantile(0.9)) if len(ratio) else math.nan,
            "transfer_round_over_shaped_median": float(rounds.median()) if len(rounds) else math.nan,
            "transfer_rounds_within_10pct": _share_within(rounds) if len(rounds) else math.nan,
            "transfer_connect_s_median": float(transfers["connect_s"].median()),
            "transfer_verify_s_median": float(transfers["verify_s"].median())}


def summarize_rounds(rounds: pd.DataFrame, *, label: str, policy: str, target: float, round_time: str,
                     tta_mode: str = "end_of_round") -> dict:
    trained = rounds[rounds["k"] > 0]
    hit = rounds[rounds["accuracy"] >= target]
    tta_s = time_to_accuracy_s(rounds, target, tta_mode)
    e_total = float(rounds["energy_kwh"].sum()) if "energy_kwh" in rounds else math.nan
    final = float(rounds["accuracy"].iloc[-1]) if len(rounds) else math.nan
    proj = trained["projected_gain"].astype(float)
    err = (proj - trained["measured_gain"]).abs()[proj.notna()]
    formula = trained["formula_gain"].astype(float) if "formula_gain" in trained else proj * np.nan
    formula_err = (formula - trained["measured_gain"]).abs()[formula.notna()]
    return {
        "label": label, "policy": policy, "round_time": round_time, "target_accuracy": target,
        "reached": bool(len(hit)), "time_to_accuracy_s": tta_s,
        "rounds_to_accuracy": int(hit["round"].iloc[0]) if len(hit) else None,
        "epoch_equivalents_to_accuracy": (float(rounds["epoch_equivalents"].iloc[:int(np.flatnonzero(
            rounds["accuracy"].to_numpy() >= target)[0]) + 1].sum()) if len(hit) and "epoch_equivalents" in rounds
            else None),
        "energy_to_accuracy_kwh": energy_to_accuracy_kwh(rounds, target, tta_mode),
        "accuracy_per_kwh": final / e_total if e_total > 0 else math.nan,
        "rounds": int(len(rounds)), "rounds_trained": int(len(trained)),
        "final_accuracy": final,
        "best_accuracy": float(rounds["accuracy"].max()) if len(rounds) else math.nan,
        "end_time_s": float(rounds["t_end_s"].iloc[-1]) if len(rounds) else 0.0,
        "mean_k": float(trained["k"].mean()) if len(trained) else 0.0,
        "mean_round_s": float(trained["round_s"].mean()) if len(trained) else math.nan,
        **compute_vs_comm(trained),
        "projected_vs_measured_mae": float(err.mean()) if len(err) else None,
        "formula_vs_measured_mae": float(formula_err.mean()) if len(formula_err) else None,
        "projected_vs_measured_corr": (float(np.corrcoef(proj[proj.notna()], trained["measured_gain"][proj.notna()])[0, 1])
                                       if proj.notna().sum() > 2 else None),
    }


def compute_vs_comm(trained: pd.DataFrame) -> dict[str, float]:
    """Compute vs communication per trained round: the means of the slowest selected site's compute
    time and of the slowest exchange (``compute_max_s``, ``comm_max_s``), and their ratio (NaN
    without communication: the centralized baseline)."""
    if not len(trained) or "compute_max_s" not in trained:
        return {"mean_compute_s": math.nan, "mean_comm_s": math.nan, "compute_over_comm": math.nan}
    comp, comm = float(trained["compute_max_s"].mean()), float(trained["comm_max_s"].mean())
    return {"mean_compute_s": comp, "mean_comm_s": comm, "compute_over_comm": comp / comm if comm > 0 else math.nan}


def sensitivity_targets(target: float) -> list[float]:
    """The target and three below it: time-to-accuracy near a plateau is decided by noisy crossings."""
    return sorted({round(t, 4) for t in (target - 0.1, target - 0.05, target - 0.02, target) if t > 0})


def tta_at(rounds: pd.DataFrame, targets: list[float], mode: str = "end_of_round") -> dict[str, float]:
    return {f"{t:g}": time_to_accuracy_s(rounds, t, mode) / 3600.0 for t in targets}


def _h(x: float) -> str:
    return "not reached" if x is None or not math.isfinite(x) else f"{x:.3f} h"


def _kwh(x) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x:.2f} kWh"


def _num(x) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x:.4f}"


def _pct(x: float) -> str:
    return f"{x:+.0f} %" if math.isfinite(x) else "n/a"


def _reduction(ours: float, base: float) -> float:
    if not (math.isfinite(ours) and math.isfinite(base)) or base <= 0:
        return math.nan
    return 100.0 * (1.0 - ours / base)


def claims(summaries: dict[str, dict], static_labels: list[str]) -> dict:
    """PowerTrip against every baseline, and against the best static k found post hoc. Runs with the
    pooled round-time model are compared only among themselves."""
    out: dict = {"paper": PAPER, "by_model": {}}
    for model in ("straggler", "pooled", "pooled_eq7_as_written"):
        s = {k: v for k, v in summaries.items() if v["round_time"] == model}
        pts = [k for k, v in s.items() if v["policy"] == "powertrip"]
        if not pts:
            continue
        pt = pts[0]
        tta = {k: v["time_to_accuracy_s"] / 3600.0 for k, v in s.items()}  # hours, as the paper's
        statics = {k: tta[k] for k in s if k in static_labels}
        finite = {k: v for k, v in statics.items() if math.isfinite(v)}
        best_static = min(finite, key=finite.get) if finite else (next(iter(statics)) if statics else None)
        baselines = {k: v for k, v in tta.items() if s[k]["policy"] != "powertrip"}
        k70 = next((k for k in statics if s[k].get("k") == PAPER["static_best_k"]), None)
        red = {k: _reduction(tta[pt], v) for k, v in baselines.items()}
        out["by_model"][model] = {
            "powertrip": pt, "powertrip_h": tta[pt], "best_static": best_static,
            "best_static_h": tta.get(best_static, math.nan) if best_static else math.nan,
            "best_static_k": s[best_static].get("k") if best_static else None,
            "reduction_vs_pct": red,
            "reduction_vs_best_static_pct": _reduction(tta[pt], tta[best_static]) if best_static else math.nan,
            "max_reduction_pct": max((v for v in red.values() if math.isfinite(v)), default=math.nan),
            "baseline_h": baselines,
            "static_k70": k70, "static_k70_h": tta[k70] if k70 else math.nan,
            "reduction_vs_static_k70_pct": _reduction(tta[pt], tta[k70]) if k70 else math.nan,
            "powertrip_mean_k": s[pt]["mean_k"], "powertrip_gain_mae": s[pt]["projected_vs_measured_mae"],
            "accuracy_per_kwh": {k: v.get("accuracy_per_kwh", math.nan) for k, v in s.items()},
            "energy_to_accuracy_kwh": {k: v.get("energy_to_accuracy_kwh", math.nan) for k, v in s.items()},
        }
    return out


def _sensitivity_lines(summaries: dict[str, dict]) -> list[str]:
    first = next(iter(summaries.values()), {})
    targets = list(first.get("tta_h_at") or [])
    if not targets:
        return []
    best = {}
    for model in {v["round_time"] for v in summaries.values()}:
        for t in targets:
            vals = [v["tta_h_at"][t] for v in summaries.values()
                    if v["round_time"] == model and math.isfinite(v["tta_h_at"][t])]
            best[(model, t)] = min(vals) if vals else math.nan
    lines = ["", "## Time-to-accuracy (h) at other targets", "",
             "| policy | " + " | ".join(targets) + " |", "|---|" + "---|" * len(targets)]
    for label, v in summaries.items():
        cells = []
        for t in targets:
            x = v["tta_h_at"][t]
            cell = "-" if not math.isfinite(x) else f"{x:.3f}"
            cells.append(f"**{cell}**" if math.isfinite(x) and x == best[(v["round_time"], t)] else cell)
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines + ["", "Bold: the fastest policy at that target under the same round-time model. Near the "
                        "accuracy plateau, time-to-accuracy is decided by noisy crossings."]


def comparison_markdown(summaries: dict[str, dict], cl: dict, *, title: str, notes: list[str]) -> str:
    lines = [f"# {title}", "", "| policy | round time | reached | time-to-accuracy | rounds | mean k | "
             "mean round | final acc | energy (renewable / grid) | energy-to-accuracy | accuracy per kWh | "
             "projected-vs-measured gain MAE |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for k, v in summaries.items():
        mae = v["projected_vs_measured_mae"]
        lines.append(f"| {k} | {v['round_time']} | {'yes' if v['reached'] else 'no'} | {_h(v['time_to_accuracy_s'] / 3600.0)} | "
                     f"{v['rounds_to_accuracy'] or v['rounds']} | {v['mean_k']:.1f} | {v['mean_round_s']:.0f} s | "
                     f"{v['final_accuracy']:.3f} | {_kwh(v.get('energy_kwh'))} ({_kwh(v.get('renewable_kwh'))} / "
                     f"{_kwh(v.get('grid_kwh'))}) | {_kwh(v.get('energy_to_accuracy_kwh'))} | "
                     f"{_num(v.get('accuracy_per_kwh'))} | {'' if mae is None else f'{mae:.4f}'} |")
    if any("co2_kg" in v or "grid_cost" in v for v in summaries.values()):  # carbon / price traces
        lines += ["", "Grid energy's carbon (traces.carbon) and cost (traces.price; currency: manifest.json "
                  "grid_signals.currency):", "", "| policy | CO2 kg | grid cost |", "|---|---:|---:|"]
        lines += [f"| {k} | {_num(v.get('co2_kg'))} | {_num(v.get('grid_cost'))} |" for k, v in summaries.items()]
    lines += _sensitivity_lines(summaries)
    lines += ["", "## This run's numbers beside the paper's (arXiv 2507.17904)", "",
              "PowerTrip's time-to-accuracy reduction against each policy under the same clock (positive: PowerTrip "
              "faster; n/a where either missed the target). One seed decides nothing: `testbed report` over a "
              "sweep's seeds judges the claims (means, confidence intervals, censoring counts).", "",
              "| clock | PowerTrip time-to-accuracy | vs each policy | best static k here (post hoc) | "
              "vs static k = 70 | PowerTrip mean k | projected-vs-measured gain MAE |", "|---|---|---|---|---|---|---|"]
    for model, c in cl["by_model"].items():
        per = ", ".join(f"{b}: {_pct(v)}" for b, v in c["reduction_vs_pct"].items()) or "-"
        mae = c["powertrip_gain_mae"]
        best = (f"{c['best_static']} ({_h(c['best_static_h'])}): {_pct(c['reduction_vs_best_static_pct'])}"
                if c.get("best_static") else "-")
        k70 = (f"{_h(c['static_k70_h'])}: {_pct(c['reduction_vs_static_k70_pct'])}" if c.get("static_k70") else "-")
        lines.append(f"| {model} | {_h(c['powertrip_h'])} | {per} | {best} | {k70} | {c['powertrip_mean_k']:.1f} | "
                     f"{'-' if mae is None else f'{mae:.4f}'} |")
    lines += ["", f"The paper: up to {PAPER['max_reduction_pct']:.0f} % lower time-to-accuracy than the baselines; "
              f"{PAPER['powertrip_h']} h vs {PAPER['static_best_h']} h for its best static k = "
              f"{PAPER['static_best_k']} (EMNIST, its testbed: compare relative reductions, not hours)."]
    lines += ["", "## Notes", ""] + [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"
