"""Plots a paper needs, drawn from result tables only (Agg backend, no pyplot state)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from testbed.analysis.figures import save as save_figure


# What energy_mix draws, per site and step (kW over the step): above zero the power the site drew, by
# source, stacked to its demand; below zero the renewable power it did not use, stacked to what was
# available beyond its use: put into the battery, or curtailed.
MIX_DRAWN = (("renewable_used_kw", "renewable used", "#4caf50"),
             ("battery_discharge_kw", "battery discharge", "#ff9800"),
             ("grid_kw", "grid (non-renewable)", "#9e9e9e"))
MIX_UNUSED = (("battery_charge_kw", "into battery (below 0)", "#ffcc80"),
              ("curtailed_kw", "curtailed (below 0)", "#c5e1a5"))
BATTERY_KW = ("battery_discharge_kw", "battery_charge_kw")  # drawn where a site of the run has a battery


def energy_mix_data(ts: pd.DataFrame) -> pd.DataFrame:
    """The series :func:`energy_mix` draws, one row per site and step: ``t_s``, ``dt_s``, ``site``, each
    ``*_kw`` of :data:`MIX_DRAWN` and :data:`MIX_UNUSED` (the timeseries' kWh over the step; zero where
    a site has no battery), ``demand_kw`` and ``renewable_available_kw``. Over a step, drawn adds up
    to the demand and renewable used + unused to the renewable available; times ``dt_s`` they sum to
    energy_by_site.csv's kWh."""
    out = ts[["t_s", "dt_s", "site"]].copy()
    hours = pd.to_numeric(ts["dt_s"], errors="coerce") / 3600.0
    for kw in [c for c, _, _ in MIX_DRAWN + MIX_UNUSED] + ["demand_kw", "renewable_available_kw"]:
        kwh = {"renewable_used_kw": "renewable_used_kwh", "demand_kw": "demand_kwh"}.get(kw, kw[:-3] + "_kwh")
        values = ts[kwh] / hours if kwh in ts.columns else pd.Series(0.0, index=ts.index)
        out[kw] = pd.to_numeric(values, errors="coerce").fillna(0.0).astype(float)
    return out.reset_index(drop=True)


def energy_mix(ts: pd.DataFrame, migs: pd.DataFrame, path: Path, title: str) -> Path:
    """Per site: the power drawn by source (renewable used, battery discharge, grid; stacked to the
    demand), below zero the renewable power not used (into the battery, curtailed), renewable
    available as a line, migrations marked. The data: :func:`energy_mix_data`."""
    data = energy_mix_data(ts)
    sites = list(dict.fromkeys(data["site"]))
    drawn, unused = ([p for p in parts if p[0] not in BATTERY_KW or data[p[0]].any()]  # no battery: not drawn
                     for parts in (MIX_DRAWN, MIX_UNUSED))
    fig = Figure(figsize=(12, 2.2 * len(sites) + 1.0), layout="constrained")
    axes = fig.subplots(max(len(sites), 1), 1, sharex=True, squeeze=False)[:, 0]
    for ax, site in zip(axes, sites):
        d = data[data["site"] == site]
        t_h = d["t_s"].to_numpy() / 3600.0
        ax.stackplot(t_h, *[d[c].to_numpy() for c, _, _ in drawn], step="post",
                     colors=[col for _, _, col in drawn], labels=[lb for _, lb, _ in drawn], alpha=0.85)
        ax.stackplot(t_h, *[-d[c].to_numpy() for c, _, _ in unused], step="post",
                     colors=[col for _, _, col in unused], labels=[lb for _, lb, _ in unused], alpha=0.85)
        ax.step(t_h, d["renewable_available_kw"], where="post", color="#1b5e20", lw=0.8, label="renewable available")
        ax.axhline(0, color="black", lw=0.6)
        top = max(float(d["demand_kw"].max()), float(d["renewable_available_kw"].max()), 0.1) * 1.08
        below = d[[c for c, _, _ in MIX_UNUSED]].sum(axis=1)
        bottom = -max(float(below.max()), 0.05 * top) * 1.08
        if len(migs):
            out_t = migs.loc[migs["src"] == site, "t_decision_s"].to_numpy() / 3600.0
            in_t = migs.loc[migs["dst"] == site, "t_decision_s"].to_numpy() / 3600.0
            ax.plot(out_t, np.full(out_t.shape, top * 0.97), "v", color="#c62828", ms=5, label="migration out")
            ax.plot(in_t, np.full(in_t.shape, top * 0.90), "^", color="#1565c0", ms=5, label="migration in")
        ax.set_ylim(bottom, top)
        ax.set_ylabel(f"{site}\nkW")
        ax.grid(alpha=0.3)
    if sites:
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside lower center", ncols=7, fontsize=8)
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


# What energy_by_policy draws per policy (kWh): the energy drawn by source, stacked to ``total_kwh``,
# and beside it the renewable energy not used (where the run has a battery: its columns in summary.json).
POLICY_DRAWN = (("renewable_kwh", "renewable", "#4caf50"), ("battery_discharge_kwh", "battery discharge", "#ff9800"),
                ("grid_kwh", "grid", "#9e9e9e"))
POLICY_UNUSED = (("battery_charge_kwh", "into battery", "#ffcc80"), ("curtailed_kwh", "curtailed", "#c5e1a5"))


def energy_by_policy_data(summaries: dict[str, dict]) -> pd.DataFrame:
    """The bars :func:`energy_by_policy` draws, one row per policy label: every kWh key of
    :data:`POLICY_DRAWN` and :data:`POLICY_UNUSED` from its summary.json (0 where it has no such key:
    no battery) and ``total_kwh`` (a federated summary's ``energy_kwh``); the drawn ones add up to it."""
    rows = []
    for label, s in summaries.items():
        row = {"label": label}
        for key, _, _ in POLICY_DRAWN + POLICY_UNUSED:
            value = s.get(key)
            row[key] = float(value) if value is not None and np.isfinite(float(value)) else 0.0
        total = s.get("total_kwh", s.get("energy_kwh"))  # a federated summary's all-energy key: energy_kwh
        row["total_kwh"] = float(total) if total is not None else sum(row[k] for k, _, _ in POLICY_DRAWN)
        rows.append(row)
    return pd.DataFrame(rows, columns=["label", *[k for k, _, _ in POLICY_DRAWN + POLICY_UNUSED], "total_kwh"])


def energy_by_policy(summaries: dict[str, dict], path: Path, title: str) -> Path:
    """Per policy: the energy drawn by source (renewable, battery discharge, grid; stacked to the
    total), and, where a site has a battery, a second bar of the renewable energy not used (into the
    battery, curtailed). The data: :func:`energy_by_policy_data`."""
    data = energy_by_policy_data(summaries)
    unused = any(k in s for s in summaries.values() for k, _, _ in POLICY_UNUSED)
    fig = Figure(figsize=(max(7, 1.6 * len(data) + 2), 4.2), layout="constrained")
    ax = fig.subplots()
    x = np.arange(len(data))
    width = 0.4 if unused else 0.8
    left = x - width / 2 if unused else x
    for parts, where, hatch in ((POLICY_DRAWN, left, None), (POLICY_UNUSED, x + width / 2, "//")):
        if parts is POLICY_UNUSED and not unused:
            continue
        bottom = np.zeros(len(data))
        for key, label, colour in parts:
            values = data[key].to_numpy(dtype=float)
            if key in ("renewable_kwh", "grid_kwh") or values.any():  # battery parts: where there is one
                ax.bar(where, values, width, bottom=bottom, color=colour, hatch=hatch, edgecolor="white", label=label)
            bottom += values
    for i, r in data.iterrows():
        top = sum(r[k] for k, _, _ in POLICY_DRAWN)
        ax.text(left[i], top, f"{r['grid_kwh']:.0f} kWh grid", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(x, data["label"])
    ax.set_ylabel("energy (kWh)")
    ax.set_title(title)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
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
