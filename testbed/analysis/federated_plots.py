"""Figures of the PowerTrip study: accuracy vs time, sites selected over time, straggler vs pooled,
projected vs measured accuracy gain per round."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure


def _style(i: int) -> dict:
    """Ten colours, then the same colours dashed, then dotted: every policy stays distinguishable."""
    return {"color": f"C{i % 10}", "ls": ("-", "--", ":")[(i // 10) % 3]}


def accuracy_vs_time(rounds: dict[str, pd.DataFrame], target: float, path: Path, title: str) -> Path:
    fig = Figure(figsize=(8, 4.5))
    ax = fig.add_subplot()
    for i, (label, df) in enumerate(rounds.items()):
        ax.step([0.0] + list(df["t_end_s"] / 3600.0), [df["accuracy_before"].iloc[0]] + list(df["accuracy"]),
                where="post", label=label, lw=1.2, **_style(i))
    ax.axhline(target, color="k", ls=":", lw=1, label=f"target {target:g}")
    ax.set_xlabel("scenario time (h)")
    ax.set_ylabel("test accuracy")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return path


def sites_selected(rounds: dict[str, pd.DataFrame], path: Path, title: str) -> Path:
    fig = Figure(figsize=(8, 4))
    ax = fig.add_subplot()
    for i, (label, df) in enumerate(rounds.items()):
        ax.step(list(df["t_start_s"] / 3600.0) + [df["t_end_s"].iloc[-1] / 3600.0], list(df["k"]) + [df["k"].iloc[-1]],
                where="post", label=label, lw=1.2, **_style(i))
    ax.set_xlabel("scenario time (h)")
    ax.set_ylabel("sites selected (k)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return path


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
    fig.savefig(path, dpi=120)
    return path


def gain_projection(rounds: dict[str, pd.DataFrame], path: Path, title: str) -> Path | None:
    """Per round of every run that projects its gain: the projection it chose by against the
    accuracy gain the round really had (left), and both over the rounds (right). Where a run
    corrects the formula, the formula's own projection is drawn too (hollow). ``None`` when no run
    projects."""
    runs = {label: df[df["k"] > 0] for label, df in rounds.items()
            if "projected_gain" in df and df["projected_gain"].notna().any()}
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
    fig.savefig(path, dpi=120)
    return path
