"""Plots a paper needs, drawn from result tables only (Agg backend, no pyplot state)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from testbed.analysis.figures import save as save_figure


def energy_mix(ts: pd.DataFrame, migs: pd.DataFrame, path: Path, title: str) -> Path:
    """Per site: renewable used vs grid power (stacked), renewable available, migrations marked."""
    sites = list(dict.fromkeys(ts["site"]))
    fig = Figure(figsize=(12, 1.9 * len(sites) + 1.0), layout="constrained")
    axes = fig.subplots(len(sites), 1, sharex=True, squeeze=False)[:, 0]
    for ax, site in zip(axes, sites):
        d = ts[ts["site"] == site]
        t_h = d["t_s"].to_numpy() / 3600.0
        ren, grid = d["renewable_used_kw"].to_numpy(), d["grid_kw"].to_numpy()
        ax.stackplot(t_h, ren, grid, step="post", colors=["#4caf50", "#9e9e9e"],
                     labels=["renewable used", "grid (non-renewable)"], alpha=0.85)
        ax.step(t_h, d["renewable_available_kw"], where="post", color="#1b5e20", lw=0.8, label="renewable available")
        top = max(float(d["demand_kw"].max()), float(d["renewable_available_kw"].max()), 0.1) * 1.08
        if len(migs):
            out_t = migs.loc[migs["src"] == site, "t_decision_s"].to_numpy() / 3600.0
            in_t = migs.loc[migs["dst"] == site, "t_decision_s"].to_numpy() / 3600.0
            ax.plot(out_t, np.full(out_t.shape, top * 0.97), "v", color="#c62828", ms=5, label="migration out")
            ax.plot(in_t, np.full(in_t.shape, top * 0.90), "^", color="#1565c0", ms=5, label="migration in")
        ax.set_ylim(0, top)
        ax.set_ylabel(f"{site}\nkW")
        ax.grid(alpha=0.3)
    axes[0].legend(loc="upper left", ncols=5, fontsize=8, bbox_to_anchor=(0, 1.35))
    axes[-1].set_xlabel("scenario time (h)")
    fig.suptitle(title)
    return save_figure(fig, path, dpi=110)


def jct_cdf(jobs: dict[str, pd.DataFrame], path: Path, title: str) -> Path:
    fig = Figure(figsize=(7, 4.5), layout="constrained")
    ax = fig.subplots()
    styles = ["-", "--", "-.", ":"]
    for i, (label, df) in enumerate(jobs.items()):
        jct = np.sort(df.loc[df["status"] == "completed", "jct_s"].to_numpy(dtype=float)) / 3600.0
        if jct.size == 0:
            continue
        y = np.arange(1, jct.size + 1) / len(df)
        ax.step(jct, y, where="post", ls=styles[i % len(styles)], lw=1.6,
                label=f"{label} (n={jct.size}/{len(df)}, mean {jct.mean():.1f} h)")
    ax.set_xlabel("job completion time (h)")
    ax.set_ylabel("fraction of all jobs completed")
    ax.set_ylim(0, 1.0)
    ax.grid(alpha=0.3)
    if ax.get_lines():
        ax.legend(fontsize=8, loc="lower right")
    else:  # no policy completed a job in the run: say so on the plot, not with an empty legend
        ax.text(0.5, 0.5, "no job completed", ha="center", va="center", transform=ax.transAxes, color="0.4")
    ax.set_title(title)
    return save_figure(fig, path, dpi=110)


def energy_by_policy(summaries: dict[str, dict], path: Path, title: str) -> Path:
    labels = list(summaries)
    ren = [summaries[lb]["renewable_kwh"] for lb in labels]
    grid = [summaries[lb]["grid_kwh"] for lb in labels]
    fig = Figure(figsize=(7, 4), layout="constrained")
    ax = fig.subplots()
    x = np.arange(len(labels))
    ax.bar(x, ren, color="#4caf50", label="renewable")
    ax.bar(x, grid, bottom=ren, color="#9e9e9e", label="grid")
    for i, (r, g) in enumerate(zip(ren, grid)):
        ax.text(i, r + g, f"{g:.0f} kWh grid", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(x, labels)
    ax.set_ylabel("energy (kWh)")
    ax.set_title(title)
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    return save_figure(fig, path, dpi=110)


def power_caps(ts: pd.DataFrame, power: pd.DataFrame, path: Path, title: str) -> Path:
    """Per site: the budget each running node had (requested cap), the cap enforced, and the
    speed that left (throughput fraction, right axis); measured GPU power where a backend reads it."""
    sites = list(dict.fromkeys(ts["site"]))
    fig = Figure(figsize=(12, 1.9 * len(sites) + 1.0), layout="constrained")
    axes = fig.subplots(len(sites), 1, sharex=True, squeeze=False)[:, 0]
    right = []
    for ax, site in zip(axes, sites):
        d = ts[ts["site"] == site]
        t_h = d["t_s"].to_numpy() / 3600.0
        ax.step(t_h, d["cap_requested_w"], where="post", color="#ef6c00", lw=0.9, label="cap requested (budget)")
        ax.step(t_h, d["cap_w"], where="post", color="#283593", lw=1.4, label="cap enforced")
        p = power[power["site"] == site] if len(power) else power
        for basis, color in (("measured", "#6a1b9a"), ("derived", "#ad1457")):  # never the model's own draw
            q = p[p["gpu_power_basis"] == basis] if len(p) and "gpu_power_basis" in p else p.iloc[0:0]
            if len(q) and q["gpu_power_w"].notna().any():
                ax.plot(q["t_s"] / 3600.0, q["gpu_power_w"], ".", ms=2, color=color, label=f"GPU power {basis}")
        ax.set_ylabel(f"{site}\nW per GPU")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax2 = ax.twinx()
        ax2.step(t_h, d["throughput_frac"].where(d["running"] > 0), where="post", color="#2e7d32", lw=0.8,
                 alpha=0.8, label="throughput (right)")
        ax2.set_ylim(0, 1.05)
        ax2.set_ylabel("speed")
        right.append(ax2)
    h1, l1 = axes[0].get_legend_handles_labels()
    h2, l2 = right[0].get_legend_handles_labels()
    axes[0].legend(h1 + h2, l1 + l2, loc="upper left", ncols=4, fontsize=8, bbox_to_anchor=(0, 1.35))
    axes[-1].set_xlabel("scenario time (h)")
    fig.suptitle(title)
    return save_figure(fig, path, dpi=110)
