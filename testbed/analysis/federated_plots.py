"""Figures of the PowerTrip study: accuracy vs time, sites selected over time, straggler vs pooled."""

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
