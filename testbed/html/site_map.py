"""The sites on a map (their ``lat_deg`` / ``lon_deg``, an equirectangular projection), migrations as
arcs from source to destination coloured by outcome; for the federated study, each participant's
link to the aggregator drawn by how often the run selected it.

A site without coordinates (a results directory whose manifest records none) is laid out on a circle
in name order, the same way every time, and the figure says so."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch

from testbed.analysis.figures import save as save_figure

OUTCOMES = {  # outcome -> colour, in legend order
    "within budget": "#2e7d32",
    "overran budget": "#ef6c00",
    "completed": "#1565c0",
    "did not complete": "#c62828",
}
MAX_PANELS = 6


def site_coords(sites: list[dict]) -> tuple[dict[str, tuple[float, float]], str | None]:
    """site -> (x, y) for the map, and a note when some had no coordinates (laid out on a circle)."""
    named = [s for s in sites if isinstance(s, dict) and s.get("name")]
    have = {s["name"]: (float(s["lon_deg"]), float(s["lat_deg"])) for s in named
            if s.get("lat_deg") is not None and s.get("lon_deg") is not None}
    if len(have) == len(named) and have:
        mean_lat = math.radians(sum(lat for _, lat in have.values()) / len(have))
        return {n: (lon * math.cos(mean_lat), lat) for n, (lon, lat) in have.items()}, None
    names = sorted(s["name"] for s in named)
    circle = {n: (math.cos(2 * math.pi * i / max(len(names), 1)), math.sin(2 * math.pi * i / max(len(names), 1)))
              for i, n in enumerate(names)}
    return circle, ("the topology gives no coordinates for " + ("some sites" if have else "its sites")
                    + ": they are laid out on a circle in name order")


def outcome(m: pd.DataFrame) -> pd.Series:
    """Per migration: within budget, overran budget, completed (not judged against a budget) or did not complete."""
    status = m["status"].astype(str) if "status" in m else pd.Series("completed", index=m.index)
    done = status == "completed"
    over = m["overran"].astype("boolean").fillna(False) if "overran" in m else pd.Series(False, index=m.index)
    within = m["within_budget"].astype("boolean").fillna(False) if "within_budget" in m else pd.Series(False, index=m.index)
    out = pd.Series("completed", index=m.index, dtype=object)
    out[done & within.to_numpy(bool)] = "within budget"
    out[done & over.to_numpy(bool)] = "overran budget"
    out[~done] = "did not complete"
    return out


def _sites(ax, xy: dict[str, tuple[float, float]], sizes: dict[str, float] | None = None, star: str | None = None) -> None:
    many = len(xy) > 25
    for name, (x, y) in xy.items():
        s = (sizes or {}).get(name, 30.0)
        ax.scatter([x], [y], s=160 if name == star else s, marker="*" if name == star else "o", zorder=3,
                   color="#263238" if name == star else "#546e7a", edgecolors="white", linewidths=0.6)
        if not many or name == star:
            ax.annotate(name, (x, y), xytext=(4, 4), textcoords="offset points", fontsize=8, zorder=4)
    xs, ys = [p[0] for p in xy.values()], [p[1] for p in xy.values()]
    pad_x, pad_y = max(0.08 * (max(xs) - min(xs)), 0.5), max(0.08 * (max(ys) - min(ys)), 0.5)
    ax.set_xlim(min(xs) - pad_x, max(xs) + 2.5 * pad_x)
    ax.set_ylim(min(ys) - pad_y, max(ys) + pad_y)
    ax.set_aspect("equal")
    ax.set_xticks([])  # projected coordinates: north is up, east right, distances to scale; no degrees to read
    ax.set_yticks([])


def migration_map(xy: dict[str, tuple[float, float]], migrations: dict[str, pd.DataFrame], path: Path,
                  title: str, note: str | None = None) -> Path:
    """One panel per policy that migrated (at most ``MAX_PANELS``): an arc per source -> destination
    and outcome, its width growing with the number of migrations; the legend counts them."""
    shown = {lb: m for lb, m in migrations.items() if len(m)}
    panels = list(shown.items())[:MAX_PANELS] or [("no policy migrated a job", pd.DataFrame())]
    cols = min(3, len(panels))
    rows = -(-len(panels) // cols)
    fig = Figure(figsize=(5.0 * cols, 4.2 * rows + 0.9), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax, (label, m) in zip(axes, panels):
        _sites(ax, xy)
        ax.set_title(str(label).replace("_", " "), fontsize=10)
        if not len(m):
            continue
        m = m[m["src"].isin(xy) & m["dst"].isin(xy)]
        counts = m.assign(outcome=outcome(m)).groupby(["src", "dst", "outcome"], sort=True).size()
        for i, ((src, dst, what), n) in enumerate(counts.items()):
            ax.add_patch(FancyArrowPatch(xy[src], xy[dst], connectionstyle=f"arc3,rad={0.18 + 0.06 * (i % 3)}",
                                         arrowstyle="-|>", mutation_scale=10, lw=1.0 + 1.2 * math.log1p(n),
                                         color=OUTCOMES[what], alpha=0.85, zorder=2))
        for what, colour in OUTCOMES.items():
            n = int((outcome(m) == what).sum())
            if n:
                ax.plot([], [], color=colour, lw=2, label=f"{what} ({n})")
        ax.legend(fontsize=7, loc="upper right")
    for ax in axes[len(panels):]:
        ax.set_axis_off()
    fig.suptitle(title + (f"\n({note})" if note else ""), fontsize=10)
    return save_figure(fig, path, dpi=110)


def selection_map(xy: dict[str, tuple[float, float]], aggregator: str, selected: pd.Series, path: Path,
                  title: str, note: str | None = None) -> Path:
    """Federated: each participant's link to the aggregator (star), darker and wider the more rounds
    selected it; a site's size grows with the same count."""
    fig = Figure(figsize=(7.5, 5.2), layout="constrained")
    ax = fig.subplots()
    top = max(float(selected.max()) if len(selected) else 0.0, 1.0)
    sizes = {s: 14.0 + 70.0 * float(selected.get(s, 0)) / top for s in xy}
    if aggregator in xy:
        for site, (x, y) in xy.items():
            share = float(selected.get(site, 0)) / top
            if site != aggregator and share > 0:
                ax.plot([x, xy[aggregator][0]], [y, xy[aggregator][1]], color="#1565c0", alpha=0.15 + 0.7 * share,
                        lw=0.5 + 2.5 * share, zorder=1)
    _sites(ax, xy, sizes, star=aggregator)
    ax.plot([], [], color="#1565c0", lw=2, label=f"selected in up to {int(top)} rounds")
    ax.scatter([], [], marker="*", s=120, color="#263238", label="aggregator")
    ax.legend(fontsize=8, loc="upper right")
    fig.suptitle(title + (f"\n({note})" if note else ""), fontsize=10)
    return save_figure(fig, path, dpi=110)
