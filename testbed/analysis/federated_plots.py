"""Figures of the PowerTrip study: accuracy vs time, sites selected over time, straggler vs pooled,
projected vs measured accuracy gain per round."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure
from testbed.analysis.figures import save as save_figure


MAX_LINES = 6  # a panel stays readable


def shown(summaries: dict[str, dict], clock: str) -> list[tuple[str, str, str]]:
    """At most ``MAX_LINES`` (label, legend, colour) of one clock's runs: PowerTrip, the fastest static k of
    this run (post hoc), static k = 70, random, fixed radius and centralized, in that order; each role one
    colour in every figure. The other runs are in the run's tables (rounds.parquet, comparison.md)."""
    runs = {lb: s for lb, s in summaries.items() if s.get("round_time") == clock and not s.get("best_of")}

    def tta(lb: str) -> float:
        v = runs[lb].get("time_to_accuracy_s")
        return float("inf") if v is None or v != v else float(v)

    by = lambda name: [lb for lb, s in runs.items() if s.get("policy") == name]  # noqa: E731
    statics = by("static_k")
    best = min(statics, key=lambda lb: (tta(lb), lb)) if statics else None
    k70 = next((lb for lb in statics if runs[lb].get("k") == 70), None)
    roles = [(by("powertrip")[:1], "PowerTrip", "C3"), ([best] if best else [], "best static k here", "C0"),
             ([k70] if k70 and k70 != best else [], "static k = 70", "C2"), (by("random")[:1], "random", "C1"),
             (by("fixed_radius")[:1], "fixed radius", "C4"), (by("centralized")[:1], "centralized", "C7")]
    out = [(lbs[0], f"{lbs[0]} ({role})" if role not in ("random", "fixed radius", "centralized", "PowerTrip")
            else lbs[0], colour) for lbs, role, colour in roles if lbs]
    extra = [lb for lb in runs if lb not in {o[0] for o in out}]  # other runs (plug-ins, variants)
    for i, lb in enumerate(extra[:max(0, MAX_LINES - len(out))]):
        out.append((lb, lb, ("C5", "C6", "C8", "C9")[i % 4]))
    return out[:MAX_LINES]


def _clocks(summaries: dict[str, dict]) -> list[str]:
    return list(dict.fromkeys(s.get("round_time", "straggler") for s in summaries.values() if not s.get("best_of")))


def _clock_panels(rounds: dict[str, pd.DataFrame], summaries: dict[str, dict], path: Path, title: str,
                  ylabel: str, height: float, draw, target: float | None = None) -> Path:
    """One panel per clock, each with :func:`shown`'s runs drawn by ``draw(ax, rounds_df, legend, colour)``."""
    clocks = _clocks(summaries)
    fig = Figure(figsize=(6 * len(clocks), height))
    for j, clock in enumerate(clocks):
        ax = fig.add_subplot(1, len(clocks), j + 1)
        for label, legend, colour in shown(summaries, clock):
            draw(ax, rounds[label], legend, colour)
        if target is not None:
            ax.axhline(target, color="k", ls=":", lw=1, label=f"target {target:g}")
        ax.set_xlabel("scenario time (h)")
        ax.set_ylabel(ylabel)
        ax.set_title(f"{clock} clock", fontsize=9)
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return save_figure(fig, path, dpi=120)


def accuracy_vs_time(rounds: dict[str, pd.DataFrame], summaries: dict[str, dict], target: float, path: Path,
                     title: str) -> Path:
    """Test accuracy against scenario time, one panel per clock, at most ``MAX_LINES`` runs each."""
    def draw(ax, df, legend, colour):
        ax.step([0.0] + list(df["t_end_s"] / 3600.0), [df["accuracy_before"].iloc[0]] + list(df["accuracy"]),
                where="post", label=legend, lw=1.3, color=colour)
    return _clock_panels(rounds, summaries, path, title, "test accuracy", 4.5, draw, target)


def sites_selected(rounds: dict[str, pd.DataFrame], summaries: dict[str, dict], path: Path, title: str) -> Path:
    def draw(ax, df, legend, colour):
        ax.step(list(df["t_start_s"] / 3600.0) + [df["t_end_s"].iloc[-1] / 3600.0],
                list(df["k"]) + [df["k"].iloc[-1]], where="post", label=legend, lw=1.3, color=colour)
    return _clock_panels(rounds, summaries, path, title, "sites selected (k)", 4.0, draw)


def straggler_vs_pooled(rounds: dict[str, pd.DataFrame], labels: list[str], target: float, path: Path,
                        title: str) -> Path:
    """For each run: accuracy against the straggler clock (solid), the pooled clock on the same work
    (dashed) and the paper's Eq. 7 as written (dotted), for the very same rounds and selections."""
    fig = Figure(figsize=(8, 4.5))
    ax = fig.add_subplot()
    for i, label in enumerate(labels):
        df = rounds[label]
        colour = f"C{i}"
        for col, ls in (("round_s_straggler", "-"), ("round_s_pooled", "--"), ("round_s_pooled_eq7_as_written", ":")):
            if col not in df:
                continue
            t = df[col].cumsum() / 3600.0
            ax.step([0.0] + list(t), [df["accuracy_before"].iloc[0]] + list(df["accuracy"]), where="post",
                    color=colour, ls=ls, lw=1.2, label=f"{label}: {col.removeprefix('round_s_')} clock")
    ax.axhline(target, color="k", ls=":", lw=1)
    ax.set_xlabel("scenario time (h)")
    ax.set_ylabel("test accuracy")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return save_figure(fig, path, dpi=120)


def gain_projection(rounds: dict[str, pd.DataFrame], path: Path, title: str) -> Path | None:
    """Per round of every run that projects its gain: the projection it chose by against the
    accuracy gain the round really had (left), and both over the rounds (right). Where a run
    corrects the formula, the formula's own projection is drawn too (hollow). ``None`` when no run
    projects."""
    runs = {label: df[df["k"] > 0] for label, df in rounds.items()
            if "projected_gain" in df and df["projected_gain"].notna().any()}
    runs = dict(list(runs.items())[:MAX_LINES // 2])  # two lines each in the right panel
    if not runs:
        return None
    fig = Figure(figsize=(10, 4.2))
    ax, bx = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    hi = 0.0
    for i, (label, df) in enumerate(runs.items()):
        colour = f"C{i % 10}"
        ax.scatter(df["projected_gain"], df["measured_gain"], s=12, color=colour, label=f"{label}: used")
        bx.plot(df["round"], df["measured_gain"], color=colour, lw=1.2, label=f"{label}: measured")
        bx.plot(df["round"], df["projected_gain"], color=colour, lw=1, ls="--", label=f"{label}: projected")
        hi = max(hi, float(df["projected_gain"].max()), float(df["measured_gain"].max()))
        corrected = "formula_gain" in df and not df["formula_gain"].equals(df["projected_gain"])
        if corrected and df["formula_gain"].notna().any():
            ax.scatter(df["formula_gain"], df["measured_gain"], s=12, facecolors="none", edgecolors=colour,
                       label=f"{label}: formula")
            hi = max(hi, float(df["formula_gain"].max()))
    ax.plot([0, hi], [0, hi], color="k", lw=0.8, ls=":", label="measured = projected")
    ax.set_xlabel("projected accuracy gain of the round")
    ax.set_ylabel("measured accuracy gain of the round")
    bx.set_xlabel("round")
    bx.set_ylabel("accuracy gain")
    bx.axhline(0, color="k", lw=0.5)
    for a in (ax, bx):
        a.legend(fontsize=6)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return save_figure(fig, path, dpi=120)
