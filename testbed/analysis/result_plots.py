"""Figures of one run's or one sweep's tables for a notebook (``r.plot...``, ``s.plot...``): each
returns a ``matplotlib.figure.Figure`` (no pyplot state; Jupyter shows it, ``fig.savefig`` writes it).

- :func:`timeseries`: one policy's time series, one panel per site (migrations out and in marked,
  as the run's ``energy_mix`` figure marks them);
- :func:`pred_vs_realised`: each migration's predicted time against the realised one
  (:func:`testbed.analysis.outcomes.outcome_s`), each point labelled by where the realised value
  came from: ``measured`` (an emulated substrate's measurement) or ``modelled`` (sim: a model's
  output, never called "actual");
- :func:`metric_by`: a sweep's metric against a parameter, per policy, mean and 95 % CI over seeds
  (:func:`testbed.stats.mean_ci95`, the sweep table's own rule).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from testbed.analysis.outcomes import MEASURED, MODELLED, basis, outcome_s
from testbed.stats import mean_ci95

PHASES = ("transfer", "load", "downtime", "total")


def _empty(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="0.4")


def timeseries(ts: pd.DataFrame, columns: list[str], title: str, migrations: pd.DataFrame | None = None) -> Figure:
    """``columns`` of one policy's ``timeseries`` rows (one run) against scenario time, one panel per site."""
    sites = list(dict.fromkeys(ts["site"])) or ["(no site)"]
    fig = Figure(figsize=(11, 1.9 * len(sites) + 1.2), layout="constrained")
    axes = fig.subplots(len(sites), 1, sharex=True, squeeze=False)[:, 0]
    for ax, site in zip(axes, sites):
        d = ts[ts["site"] == site]
        t_h = d["t_s"].to_numpy(dtype=float) / 3600.0
        for col in columns:
            ax.step(t_h, pd.to_numeric(d[col], errors="coerce"), where="post", lw=1.2, label=col)
        if migrations is not None and len(migrations) and len(d):
            top = ax.get_ylim()[1]
            out_t = migrations.loc[migrations["src"] == site, "t_decision_s"].to_numpy(dtype=float) / 3600.0
            in_t = migrations.loc[migrations["dst"] == site, "t_decision_s"].to_numpy(dtype=float) / 3600.0
            ax.plot(out_t, np.full(out_t.shape, top * 0.97), "v", color="#c62828", ms=5, label="migration out")
            ax.plot(in_t, np.full(in_t.shape, top * 0.90), "^", color="#1565c0", ms=5, label="migration in")
        if not len(d):
            _empty(ax, "no rows")
        ax.set_ylabel(site)
        ax.grid(alpha=0.3)
    handles = {lb: h for ax in axes for h, lb in zip(*ax.get_legend_handles_labels())}
    fig.suptitle(title)
    if handles:
        fig.legend(list(handles.values()), list(handles), loc="outside upper center", fontsize=8,
                   ncols=min(len(handles), 5))
    axes[-1].set_xlabel("scenario time (h)")
    return fig


def pred_vs_realised_data(m: pd.DataFrame, what: str = "total") -> pd.DataFrame:
    """The completed migrations with both values: ``policy``, ``predicted_s``, ``realised_s`` and
    ``basis`` (measured / modelled: :func:`testbed.analysis.outcomes.basis`)."""
    if what not in PHASES:
        raise ValueError(f"what must be one of {', '.join(PHASES)} (got {what!r})")
    empty = pd.DataFrame(columns=["policy", "predicted_s", "realised_s", "basis"])
    if not len(m) or f"predicted_{what}_s" not in m.columns:
        return empty
    out = pd.DataFrame({"policy": m["label"] if "label" in m.columns else m.get("policy", "?"),
                        "predicted_s": pd.to_numeric(m[f"predicted_{what}_s"], errors="coerce").astype(float),
                        "realised_s": outcome_s(m, what).astype(float), "basis": basis(m, what)},
                       index=m.index)
    if "status" in m.columns:
        out = out[m["status"] == "completed"]
    return out.dropna(subset=["predicted_s", "realised_s"]).reset_index(drop=True)


def pred_vs_realised(m: pd.DataFrame, title: str, what: str = "total") -> Figure:
    """Predicted against realised ``what`` (seconds) of every completed migration in ``m`` (a
    ``migrations`` table: one run's or a sweep's), per policy, a point's marker saying whether the
    realised value was measured or modelled; the line where they are equal."""
    d = pred_vs_realised_data(m, what)
    fig = Figure(figsize=(6.5, 5.5), layout="constrained")
    ax = fig.subplots()
    markers = {MEASURED: "o", MODELLED: "x"}
    colours = [f"C{i}" for i in range(10)]
    for i, policy in enumerate(dict.fromkeys(d["policy"])):
        for kind in (MEASURED, MODELLED):
            q = d[(d["policy"] == policy) & (d["basis"] == kind)]
            if len(q):
                ax.scatter(q["predicted_s"], q["realised_s"], marker=markers[kind], color=colours[i % 10], s=28,
                           label=f"{policy} ({kind}, n={len(q)})")
    if len(d):
        hi = float(max(d["predicted_s"].max(), d["realised_s"].max())) * 1.05
        ax.plot([0, hi], [0, hi], color="k", lw=0.8, ls=":", label="realised = predicted")
        ax.set_xlim(0, hi)
        ax.set_ylim(0, hi)
        ax.legend(fontsize=8, loc="lower right")
    else:
        _empty(ax, "no completed migration with a prediction and a realised time")
    bases = sorted(set(d["basis"].dropna()))
    how = " or ".join(bases) if bases else "measured or modelled"
    ax.set_xlabel(f"predicted {what} (s)")
    ax.set_ylabel(f"realised {what} (s), {how}")
    if what == "total":  # Eq. 1 predicts transfer + load + downtime; the realised total has the write too
        ax.text(0.02, 0.98, "realised total includes the checkpoint write;\nthe prediction (Eq. 1) leaves it out",
                transform=ax.transAxes, va="top", fontsize=7, color="0.35")
    ax.grid(alpha=0.3)
    ax.set_title(title)
    return fig


def metric_by_data(summary: pd.DataFrame, metric: str, by: str) -> pd.DataFrame:
    """Per policy label and value of ``by``: n, mean, std and ci95 (half-width) of ``metric`` over
    the trials (seeds) of a sweep's ``summary``."""
    rows = []
    for (label, value), g in summary.groupby(["label", by], sort=False, dropna=False):
        n, mean, std, ci = mean_ci95(pd.to_numeric(g[metric], errors="coerce").to_numpy(dtype=float))
        rows.append({"label": label, by: value, "n": n, "mean": mean, "std": std, "ci95": ci})
    return pd.DataFrame(rows, columns=["label", by, "n", "mean", "std", "ci95"])


def metric_by(summary: pd.DataFrame, metric: str, by: str, title: str) -> Figure:
    """``metric`` against the sweep parameter ``by``, one line per policy: the mean over seeds with
    its 95 % CI as error bars (none where a point has a single seed)."""
    d = metric_by_data(summary, metric, by)
    fig = Figure(figsize=(7, 4.5), layout="constrained")
    ax = fig.subplots()
    values = list(dict.fromkeys(d[by]))
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in values)
    order = sorted(values) if numeric else values
    where = {v: (float(v) if numeric else i) for i, v in enumerate(order)}
    labels = list(dict.fromkeys(d["label"]))
    span = (max(where.values()) - min(where.values())) if numeric and len(where) > 1 else 1.0
    for i, label in enumerate(labels):
        q = d[d["label"] == label].copy()
        dodge = (i - (len(labels) - 1) / 2) * 0.012 * (span or 1.0)  # policies side by side, bars apart
        q["x"] = q[by].map(where) + dodge
        q = q.sort_values("x")
        n = f"n={q['n'].min()}" if q["n"].min() == q["n"].max() else f"n={q['n'].min()}-{q['n'].max()}"
        ax.errorbar(q["x"], q["mean"], yerr=q["ci95"].fillna(0.0), marker="o", capsize=3, lw=1.4,
                    label=f"{label} ({n})")
    if not numeric:
        ax.set_xticks(list(where.values()), [str(v) for v in order])
    if len(d):
        ax.legend(fontsize=8)
    else:
        _empty(ax, "no completed trial")
    ax.set_xlabel(by)
    ax.set_ylabel(f"{metric} (mean, 95 % CI over seeds)")
    ax.grid(alpha=0.3)
    ax.set_title(title)
    return fig
