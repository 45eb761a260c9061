"""Feasibility phase diagram: the paper's Fig. 2 done right.

Checkpoint size against WAN bandwidth (both log), shaded by OUR classes (Eq. 1 jointly with the
window and the bandwidth), with the Eq. 1 boundary, the paper's fixed 60 s / 300 s transfer-time
cut-offs for comparison, the paper's Table III cases, and optionally measured migrations.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from testbed.analysis.outcomes import outcome_s
from testbed.feasibility import (
    PAPER_CLASS_A_MAX_S,
    PAPER_CLASS_B_MAX_S,
    FeasibilityParams,
    assess,
    max_size_gb,
    size_for_transfer_time_gb,
)
from testbed.analysis.figures import save as save_figure

BANDWIDTH_RANGE_GBPS = (0.1, 100.0)
SIZE_RANGE_GB = (1.0, 1000.0)
# The paper's Table III cases: (checkpoint size in GB, WAN bandwidth in Gbit/s, label offset in points).
PAPER_TABLE_III = ((100.0, 1.0, (-12, 34)), (280.0, 10.0, (-14, 40)), (40.0, 10.0, (14, -42)))

_CLASS_COLOURS = {"A": "#b7e1b0", "B": "#fde3a0", "C": "#f4b6b0"}


def _format_window(window_s: float) -> str:
    if window_s >= 3600:
        return f"{window_s / 3600:.3g} h"
    return f"{window_s / 60:.3g} min"


def _class_legend(params: FeasibilityParams) -> list[Patch]:
    loss_pct = 100 * params.robust_degradation_frac
    return [
        Patch(color=_CLASS_COLOURS["A"], label=f"A: feasible even with {loss_pct:.0f}% bandwidth loss"),
        Patch(color=_CLASS_COLOURS["B"], label="B: feasible at nominal bandwidth only"),
        Patch(color=_CLASS_COLOURS["C"], label="C: infeasible (Eq. 1 violated)"),
    ]


def _draw_regions(ax, bandwidths_gbps: np.ndarray, window_s: float, params: FeasibilityParams) -> np.ndarray:
    """Shade the class regions; return the Eq. 1 boundary (max feasible size per bandwidth)."""
    lo_gb, hi_gb = SIZE_RANGE_GB
    degraded = bandwidths_gbps * (1.0 - params.robust_degradation_frac)
    boundary_gb = np.array([max_size_gb(b, window_s, params) for b in bandwidths_gbps])
    robust_gb = np.array([max_size_gb(b, window_s, params) for b in degraded])
    feasible_edge = np.clip(boundary_gb, lo_gb, hi_gb)
    robust_edge = np.clip(robust_gb, lo_gb, hi_gb)
    ax.fill_between(bandwidths_gbps, lo_gb, robust_edge, color=_CLASS_COLOURS["A"], lw=0)
    ax.fill_between(bandwidths_gbps, robust_edge, feasible_edge, color=_CLASS_COLOURS["B"], lw=0)
    ax.fill_between(bandwidths_gbps, feasible_edge, hi_gb, color=_CLASS_COLOURS["C"], lw=0)
    return boundary_gb


def _draw_paper_cutoffs(ax, bandwidths_gbps: np.ndarray, params: FeasibilityParams) -> None:
    corrections = params.corrections
    for i, cutoff_s in enumerate((PAPER_CLASS_A_MAX_S, PAPER_CLASS_B_MAX_S)):
        sizes_gb = np.array([size_for_transfer_time_gb(cutoff_s, b, corrections) for b in bandwidths_gbps])
        label = "paper's fixed cut-offs (60 s / 300 s)" if i == 0 else None
        ax.plot(bandwidths_gbps, np.where(sizes_gb > 0, sizes_gb, np.nan), ls="--", color="0.3", lw=1.2, label=label)


def _label_paper_cutoffs(ax, bandwidths_gbps: np.ndarray, params: FeasibilityParams) -> None:
    """Label each cut-off along its line, 15% into its visible part (call once the layout is final)."""
    for cutoff_s in (PAPER_CLASS_A_MAX_S, PAPER_CLASS_B_MAX_S):
        sizes_gb = np.array([size_for_transfer_time_gb(cutoff_s, b, params.corrections) for b in bandwidths_gbps])
        visible = np.flatnonzero((sizes_gb >= SIZE_RANGE_GB[0]) & (sizes_gb <= SIZE_RANGE_GB[1]))
        if visible.size < 2:
            continue
        i = visible[0] + int(0.15 * (visible[-1] - visible[0]))
        ax.text(
            bandwidths_gbps[i], sizes_gb[i], f"T_transfer = {cutoff_s:.0f} s",
            rotation=_slope_deg(ax, bandwidths_gbps[visible], sizes_gb[visible]),
            rotation_mode="anchor", ha="left", va="bottom", fontsize=8, color="0.2",
        )


def _slope_deg(ax, xs: np.ndarray, ys: np.ndarray) -> float:
    """On-screen angle of a curve's overall direction (the figure must have been laid out)."""
    ok = ys > 0
    (x0, y0), (x1, y1) = ax.transData.transform([(xs[ok][0], ys[ok][0]), (xs[ok][-1], ys[ok][-1])])
    return float(np.degrees(np.arctan2(y1 - y0, x1 - x0)))


def _draw_paper_points(ax, window_s: float, params: FeasibilityParams) -> None:
    for size_gb, bw_gbps, offset in PAPER_TABLE_III:
        a = assess(size_gb, bw_gbps, window_s, params)
        verdict = "feasible" if a.nominal_feasible else "infeasible"
        text = (
            f"{size_gb:g} GB @ {bw_gbps:g} Gbit/s: {a.transfer_s:.0f} s\n"
            f"ours: {a.nominal_class} ({verdict}); paper cut-offs: {a.paper_class}"
        )
        ax.plot([bw_gbps], [size_gb], marker="*", ms=14, color="black", mec="white", zorder=5)
        ax.annotate(
            text, (bw_gbps, size_gb), xytext=offset, textcoords="offset points", fontsize=8,
            ha="right" if offset[0] < 0 else "left", va="center",
            bbox={"boxstyle": "round,pad=0.3", "fc": "white", "ec": "0.5", "alpha": 0.9},
            arrowprops={"arrowstyle": "-", "color": "0.3", "lw": 0.8}, zorder=6,
        )
    ax.plot([], [], ls="", marker="*", ms=12, color="black", label="paper's Table III cases")


def _draw_measured(ax, points) -> None:
    for column in ("checkpoint_gb", "bandwidth_gbps"):
        if column not in points:
            raise ValueError(f"points: missing column {column!r}")
    sizes = np.asarray(points["checkpoint_gb"], dtype=float)
    bandwidths = np.asarray(points["bandwidth_gbps"], dtype=float)
    if "completed_in_budget" not in points:
        ax.scatter(bandwidths, sizes, s=28, c="0.2", marker="o", label="measured migration", zorder=4)
        return
    ok = np.asarray(points["completed_in_budget"], dtype=bool)
    ax.scatter(bandwidths[ok], sizes[ok], s=30, c="#1a7a2e", marker="o", label="measured: completed in budget", zorder=4)
    ax.scatter(bandwidths[~ok], sizes[~ok], s=40, c="#b3261e", marker="x", label="measured: overran budget", zorder=4)


def _set_axes(ax) -> None:
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(*BANDWIDTH_RANGE_GBPS)
    ax.set_ylim(*SIZE_RANGE_GB)
    ax.set_xlabel("WAN bandwidth B (Gbit/s)")
    ax.set_ylabel("checkpoint size S (GB)")
    ax.grid(True, which="major", color="white", lw=0.8, alpha=0.8)


def plot_phase_diagram(
    path: str | Path,
    window_s: float,
    params: FeasibilityParams = FeasibilityParams(),
    *,
    points=None,
    title: str | None = None,
) -> Path:
    """Draw the feasibility phase diagram for one window into ``path`` (format from the suffix).

    ``points``: optional DataFrame (or mapping of columns) with ``checkpoint_gb``, ``bandwidth_gbps`` and
    an optional boolean ``completed_in_budget``, drawn as measured migrations."""
    if not window_s > 0:
        raise ValueError("window_s: must be > 0")
    path = Path(path)
    fig = Figure(figsize=(10, 8), layout="constrained")
    ax = fig.add_subplot()
    bandwidths_gbps = np.logspace(np.log10(BANDWIDTH_RANGE_GBPS[0]), np.log10(BANDWIDTH_RANGE_GBPS[1]), 400)

    boundary_gb = _draw_regions(ax, bandwidths_gbps, window_s, params)
    budget_s = params.alpha * window_s
    boundary_label = f"Eq. 1 boundary (T_energy = {_format_window(window_s)}, α = {params.alpha:g}: budget {budget_s:.0f} s)"
    ax.plot(bandwidths_gbps, np.where(boundary_gb > 0, boundary_gb, np.nan), color="black", lw=2.2, label=boundary_label)
    _draw_paper_cutoffs(ax, bandwidths_gbps, params)
    _draw_paper_points(ax, window_s, params)
    if points is not None:
        _draw_measured(ax, points)

    _set_axes(ax)
    fixed_s = params.t_load_s + params.t_downtime_s
    corrections = ", ".join(params.corrections.names()) or "none"
    ax.set_title(
        title
        or f"Migration feasibility: T_transfer + T_load + T_downtime < α·T_energy\n"
        f"T_energy = {_format_window(window_s)}, α = {params.alpha:g}, T_load + T_downtime = {fixed_s:.1f} s, "
        f"transfer corrections: {corrections}",
        fontsize=11,
    )
    handles, _ = ax.get_legend_handles_labels()
    fig.legend(handles=_class_legend(params) + handles, loc="outside lower center", ncols=2, fontsize=9, frameon=False)
    fig.draw_without_rendering()  # lay out first, so that on-screen slopes are known
    _label_paper_cutoffs(ax, bandwidths_gbps, params)
    return save_figure(fig, path, dpi=130)


# ------------------------------------------------------------------ normalised, per migration
_KIND_WORDS = {"none": "undegraded link", "steady": "steady degradation", "event": "degradation event during it",
               "swept": "degraded (swept)", "measured": "degraded (measured)"}


def quadrant_counts(pred_ratio, actual_ratio) -> dict[tuple[int, int], int]:
    """Migrations per quadrant of the normalised phase diagram, keyed (predicted infeasible,
    overran): (0, 0) predicted feasible and made it, (0, 1) the model's misses, (1, 0) predicted
    infeasible but made it, (1, 1) predicted infeasible and overran. A migration without a finite
    actual ratio (never completed) overran; one without a prediction is not counted."""
    x, y = np.asarray(pred_ratio, dtype=float), np.asarray(actual_ratio, dtype=float)
    fx = np.isfinite(x)
    made = fx & (y < 1)
    left = fx & (x < 1)
    return {(0, 0): int((left & made).sum()), (0, 1): int((left & ~made).sum()),
            (1, 0): int((fx & ~left & made).sum()), (1, 1): int((fx & ~left & ~made).sum())}


def plot_normalised_phase(path: str | Path, migrations, *, title: str | None = None) -> Path:
    """Every migration judged against its *own* budget: x = predicted total / (alpha x the
    predicted window), y = actual total / (alpha x the true window), both log; Eq. 1's boundary is
    1 on both axes, so the quadrants are the confusion matrix. Needs the migrations.parquet
    columns ``predicted_total_s``, ``predicted_budget_s``, ``outcome_total_s`` (measured or
    modelled: testbed.analysis.outcomes.outcome_s), ``true_budget_s``,
    ``status`` (optional ``degradation_kind`` colours the points, ``substrate`` picks markers).
    A migration that never completed is drawn at the top edge."""
    import pandas as pd

    m = pd.DataFrame(migrations)
    for column in ("predicted_total_s", "predicted_budget_s", "true_budget_s", "status"):
        if column not in m:
            raise ValueError(f"migrations: missing column {column!r}")
    if not {"outcome_total_s", "actual_total_s", "model_total_s"} & set(m.columns):
        raise ValueError("migrations: missing column 'outcome_total_s'")
    path = Path(path)
    fig = Figure(figsize=(9, 7.5), layout="constrained")
    ax = fig.add_subplot()
    with np.errstate(divide="ignore", invalid="ignore"):
        x = m["predicted_total_s"].astype(float) / m["predicted_budget_s"].astype(float)
        done = m["status"] == "completed"
        y = (outcome_s(m, "total") / m["true_budget_s"].astype(float)).where(done)
    finite = np.concatenate([x[np.isfinite(x) & (x > 0)].to_numpy(), y[np.isfinite(y) & (y > 0)].to_numpy()])
    lo = min(0.5, float(finite.min()) / 1.5) if finite.size else 0.01
    hi = max(2.0, float(finite.max()) * 1.5) if finite.size else 100.0
    top = hi / 1.15  # where migrations without a finite actual ratio are drawn
    ax.axvspan(lo, 1, ymin=0, ymax=1, color="#e8f5e9", lw=0)
    ax.axhline(1, color="black", lw=1.4)
    ax.axvline(1, color="black", lw=1.4, ls="--")
    kinds = m["degradation_kind"].fillna("none") if "degradation_kind" in m else pd.Series("none", index=m.index)
    subs = m["substrate"] if "substrate" in m else pd.Series("", index=m.index)
    markers = {s: mk for s, mk in zip(sorted(set(subs)), ("o", "s", "D", "^"))}
    colour = {k: f"C{i}" for i, k in enumerate(sorted(set(kinds), key=lambda k: (k != "none", k)))}
    # the largest group first, so that the smaller ones stay visible on top of it
    for z, kind in enumerate(sorted(set(kinds), key=lambda k: -int((kinds == k).sum()))):
        for sub in sorted(set(subs)):
            sel = (kinds == kind) & (subs == sub)
            ok = sel & np.isfinite(y) & np.isfinite(x)
            word = _KIND_WORDS.get(kind, kind) + (f", {sub}" if len(markers) > 1 else "")
            ax.scatter(x[ok].clip(lo, hi), y[ok].clip(lo, hi), s=22, alpha=0.65, color=colour[kind], marker=markers[sub],
                       label=f"{word} (n={int(ok.sum())})", zorder=3 + z)
            miss = sel & ~np.isfinite(y) & np.isfinite(x)
            if miss.any():
                ax.scatter(x[miss].clip(lo, hi), np.full(int(miss.sum()), top), s=40, color=colour[kind], marker="^",
                           label=f"{word}: never completed or no true window (n={int(miss.sum())})", zorder=3 + z)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    count = quadrant_counts(x, y)
    # the points lie along the diagonal: the labels go into the empty corners beside it
    edge = 1.15
    for tx, ty, ha, va, text in (
            (1 / edge, lo * edge, "right", "bottom", f"predicted feasible,\nmade it: {count[0, 0]}"),
            (lo * edge, hi / edge, "left", "top", f"predicted feasible, overran\n(the model's misses): {count[0, 1]}"),
            (hi / edge, lo * edge, "right", "bottom", f"predicted infeasible,\nwould have made it: {count[1, 0]}"),
            (edge, hi / edge, "left", "top", f"predicted infeasible,\noverran: {count[1, 1]}")):
        ax.text(tx, ty, text, ha=ha, va=va, fontsize=9, color="0.25", zorder=10,
                bbox={"boxstyle": "round,pad=0.3", "fc": "white", "ec": "0.7", "alpha": 0.9})
    ax.set_xlabel("predicted total time / (α × predicted window)   [Eq. 1 holds left of 1]")
    ax.set_ylabel("realised total time / (α × true window)   [within budget below 1]")
    ax.grid(alpha=0.3, which="major")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(0.0, 0.86), framealpha=0.9)
    ax.set_title(title or "Each migration against its own budget (boundary at 1)", fontsize=11)
    return save_figure(fig, path, dpi=110)
