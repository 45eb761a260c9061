"""Per-site timelines of one run.

Migration study: per site, the jobs running under each policy over scenario time, with the site's
renewable power (shaded, right axis). Federated study: per site, the rounds in which the run
trained there (bars over the round's time), most-selected sites first."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from testbed.analysis.figures import save as save_figure

MAX_SITES = 40  # a federated timeline stays readable


def job_timelines(timeseries: dict[str, pd.DataFrame], path: Path, title: str) -> Path:
    """``timeseries``: policy label -> its ``timeseries.parquet`` (``t_s``, ``site``, ``running``,
    ``renewable_available_kw``)."""
    frames = [df for df in timeseries.values() if len(df)]
    sites = list(dict.fromkeys(frames[0]["site"])) if frames else []
    fig = Figure(figsize=(12, 1.6 * max(len(sites), 1) + 1.2), layout="constrained")
    axes = fig.subplots(max(len(sites), 1), 1, sharex=True, squeeze=False)[:, 0]
    for ax, site in zip(axes, sites):
        first = frames[0][frames[0]["site"] == site]
        power = ax.twinx()
        power.fill_between(first["t_s"] / 3600.0, first["renewable_available_kw"], step="post", color="#a5d6a7",
                           alpha=0.45, lw=0, label="renewable available (kW, right)")
        power.set_ylim(bottom=0)
        power.set_ylabel("kW", fontsize=8)
        ax.set_zorder(power.get_zorder() + 1)
        ax.patch.set_visible(False)
        for i, (label, df) in enumerate(timeseries.items()):
            d = df[df["site"] == site]
            ax.step(d["t_s"] / 3600.0, d["running"], where="post", lw=1.2, color=f"C{i}",
                    ls=("-", "--", "-.", ":")[i % 4], label=str(label).replace("_", " "))
        ax.set_ylabel(f"{site}\njobs", fontsize=9)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    if sites:
        h1, l1 = axes[0].get_legend_handles_labels()
        h2, l2 = axes[0].figure.axes[1].get_legend_handles_labels() if len(fig.axes) > 1 else ([], [])
        fig.legend(h1 + h2, l1 + l2, loc="outside upper center", ncols=min(6, len(l1) + len(l2)), fontsize=8,
                   frameon=False)
    else:
        axes[0].text(0.5, 0.5, "no site recorded", ha="center", transform=axes[0].transAxes)
    axes[-1].set_xlabel("scenario time (h)")
    fig.suptitle(title)
    return save_figure(fig, path, dpi=110)


def selection_timeline(sites: pd.DataFrame, rounds: pd.DataFrame, path: Path, title: str) -> Path:
    """``sites``: a run's ``sites.parquet`` (``round``, ``site``, ``renewable_kwh``, ``energy_kwh``);
    ``rounds``: its ``rounds.parquet`` (``round``, ``t_start_s``, ``t_end_s``). A bar per round a site
    trained in, green where its energy was renewable."""
    spans = rounds.set_index("round")[["t_start_s", "t_end_s"]] if len(rounds) else pd.DataFrame()
    d = sites[sites["round"].isin(spans.index)] if len(spans) else sites.iloc[0:0]
    order = d["site"].value_counts().index.tolist()
    note = f" (the {MAX_SITES} most selected of {len(order)})" if len(order) > MAX_SITES else ""
    order = order[:MAX_SITES]
    fig = Figure(figsize=(12, 0.28 * max(len(order), 3) + 1.6), layout="constrained")
    ax = fig.subplots()
    for y, site in enumerate(order):
        part = d[d["site"] == site]
        share = (part["renewable_kwh"] / part["energy_kwh"].where(part["energy_kwh"] > 0)).fillna(1.0).clip(0, 1)
        t0 = spans.loc[part["round"], "t_start_s"].to_numpy() / 3600.0
        t1 = spans.loc[part["round"], "t_end_s"].to_numpy() / 3600.0
        ax.broken_barh(list(zip(t0, t1 - t0)), (y - 0.35, 0.7),  # one call per site: 100 sites x 100s of rounds
                       facecolors=[(0.8 * (1 - s), 0.55 + 0.2 * s, 0.3 * (1 - s)) for s in share])
    ax.set_yticks(range(len(order)), order, fontsize=7)
    ax.set_ylim(len(order) - 0.5, -0.5)  # most selected on top
    ax.set_xlabel("scenario time (h)")
    ax.grid(axis="x", alpha=0.3)
    if not order:
        ax.text(0.5, 0.5, "no round trained", ha="center", transform=ax.transAxes)
    ax.set_title(title + note + "\nbar colour: share of the site's round energy that was renewable (green: all)",
                 fontsize=10)
    return save_figure(fig, path, dpi=110)
