"""What a policy's parts do, over seeds: the report's availability, filter and class-rule sections.

- **Renewable availability.** In a sweep over a site's renewable capacity (a swept path ending in
  ``capacity_kw`` or ``scale_to_kw`` under ``traces.renewable``), at each level: static's
  non-renewable energy, the pooled-renewables bound of static's demand
  (:mod:`testbed.analysis.bound`), the most placement alone can save against static, and each
  policy's saving. All are per-seed values with a 95 % Student-t CI. The paper's -52 % is
  *attainable* at a level only when the CI of that most-saving reaches it.
- **The filter** (Eq. 1): ``feasibility_aware`` against ``energy_only`` on the same seeds, split into
  non-renewable energy, mean JCT, overruns and migrations (paired differences, CI, paired t p).
- **The class rule**: every policy run as ``feasibility_classes`` (the paper's fixed 60/300 s
  classes in place of Eq. 1) against ``feasibility_aware`` on the same seeds, with the same split.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from testbed.analysis.claims import run_groups
from testbed.analysis.compare import shown
from testbed.analysis.markdown import md_table
from testbed.analysis.names import param_column
from testbed.stats import paired_test, t_interval
from testbed.analysis.figures import save as save_figure

PAPER_NON_RENEWABLE_PCT = -52.0
SPLIT_METRICS = (("grid_kwh", "grid kWh"), ("mean_jct_s", "mean JCT h"),
                 ("migrations_overran", "overran"), ("migrations", "migrations"))


def _ci(values, fmt: str = "{:+.1f}") -> str:
    iv = t_interval(values)
    if iv is None:
        return "-"
    if iv.n < 2:
        return fmt.format(iv.mean) + " (1 seed)"
    return f"{fmt.format(iv.mean)} [{fmt.format(iv.lo)}, {fmt.format(iv.hi)}]"


def capacity_param(sums: pd.DataFrame) -> str | None:
    """The swept renewable-capacity column of ``sums`` (``param_traces_renewable_..._capacity_kw``), if any."""
    for c in sums.columns:
        if c.startswith(param_column("traces.renewable")) and c.endswith(("capacity_kw", "scale_to_kw")) \
                and pd.to_numeric(sums[c], errors="coerce").nunique() > 1:
            return c
    return None


def availability_table(sums: pd.DataFrame, param: str) -> pd.DataFrame:
    """Per substrate and capacity level: static's non-renewable kWh, its pooled bound, the most
    placement can save (%), each policy's saving (%), and whether the paper's -52 % is attainable."""
    rows = []
    d = sums.assign(_level=pd.to_numeric(sums[param], errors="coerce")).dropna(subset=["_level"])
    for (substrate, level), g in d.groupby(["substrate", "_level"], sort=True):
        static = g[g["policy"] == "static"].set_index(["cell", "seed"])
        if static.empty:
            continue
        nonren = static["grid_kwh"].astype(float)
        bound = static["pooled_bound_grid_kwh"].astype(float) if "pooled_bound_grid_kwh" in static \
            else pd.Series(np.nan, index=static.index)
        with np.errstate(divide="ignore", invalid="ignore"):
            most = (-100.0 * (1.0 - bound / nonren)).where(nonren > 0)
        iv = t_interval(most)
        row = {"substrate": substrate, "renewable capacity (kW per site)": level, "seeds": len(static),
               "static grid kWh": _ci(nonren, "{:.0f}"), "pooled bound kWh": _ci(bound, "{:.0f}"),
               "most placement can save vs static (%)": _ci(most)}
        for label, pg in g[g["policy"] != "static"].groupby("label", sort=True):
            a = pg.set_index(["cell", "seed"])["grid_kwh"].astype(float)
            common = a.index.intersection(nonren.index)
            with np.errstate(divide="ignore", invalid="ignore"):
                row[f"{label} vs static (%)"] = _ci(100.0 * (a[common] - nonren[common]) / nonren[common])
        row["paper's -52 % attainable"] = ("-" if iv is None else
                                            "yes" if iv.lo <= PAPER_NON_RENEWABLE_PCT else "no")
        rows.append(row)
    return pd.DataFrame(rows)


def availability_plot(sums: pd.DataFrame, param: str, path: Path) -> None:
    """Change vs static (%) against renewable capacity: each policy (mean, 95 % CI), the most
    placement alone can save (pooled bound of static's demand), and the paper's -52 %."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d = sums.assign(_level=pd.to_numeric(sums[param], errors="coerce")).dropna(subset=["_level"])
    subs = sorted(set(d["substrate"]))
    fig, axes = plt.subplots(1, len(subs), figsize=(6.4 * len(subs), 4.6), squeeze=False)
    for ax, substrate in zip(axes[0], subs):
        g = d[d["substrate"] == substrate]
        static = g[g["policy"] == "static"].set_index(["_level", "cell", "seed"])
        levels = sorted(set(g["_level"]))
        series = {"most placement alone can save (pooled bound)": static.eval(
            "-100 * (1 - pooled_bound_grid_kwh / grid_kwh)")}
        for label, pg in g[g["policy"] != "static"].groupby("label", sort=True):
            a = pg.set_index(["_level", "cell", "seed"])["grid_kwh"].astype(float)
            common = a.index.intersection(static.index)
            series[label] = 100.0 * (a[common] - static.loc[common, "grid_kwh"]) / static.loc[common, "grid_kwh"]
        markers = "osD^v<>p*h"
        for i, (name, s) in enumerate(series.items()):
            ivs = [t_interval(s.xs(lv, level=0)) if lv in s.index.get_level_values(0) else None for lv in levels]
            x = [lv * (1 + 0.03 * (i - len(series) / 2)) for lv, iv in zip(levels, ivs) if iv is not None]
            ok = [iv for iv in ivs if iv is not None]
            bound = name.startswith("most")
            ax.errorbar(x, [iv.mean for iv in ok], yerr=[[iv.mean - iv.lo for iv in ok], [iv.hi - iv.mean for iv in ok]],
                        label=name, marker=None if bound else markers[i % len(markers)], capsize=3,
                        linestyle="--" if bound else "-", color="black" if bound else None, linewidth=1.4)
        ax.axhline(PAPER_NON_RENEWABLE_PCT, color="tab:red", linestyle=":", label="the paper: -52 %")
        ax.set_xscale("log")
        ax.set_xticks(levels, [f"{lv:g}" for lv in levels])
        ax.set_xlabel("renewable capacity per site (kW, peak)")
        ax.set_ylabel("grid energy vs static (%)")
        ax.set_title(f"{substrate}: saving vs static, and the most placement can save\n(mean and 95 % CI over seeds)",
                     fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)


def paired_split(runs: list, comparisons: list, a_policy: str, b_policy: str) -> pd.DataFrame:
    """Per scenario, substrate and cell: for every run label of policy ``a_policy`` against the
    label named ``b_policy`` (else the first of that policy), the per-seed difference a - b of each
    split metric (mean, 95 % CI) and its paired t p."""
    paper, other, _ = run_groups(runs, comparisons)
    rows = []
    for (scenario, substrate, cell), comps in sorted({**paper, **other}.items()):
        labels_a = list(dict.fromkeys(lb for c in comps for lb, r in c["policies"].items() if r.get("policy") == a_policy))
        for la in labels_a:
            row = {"scenario": scenario, "substrate": substrate, "cell": cell, "policy": la, "against": None}
            for metric, name in SPLIT_METRICS:
                xa, xb = [], []
                for c in comps:
                    pol = c["policies"]
                    lb = b_policy if pol.get(b_policy, {}).get("policy") == b_policy else next(
                        (k for k, r in pol.items() if r.get("policy") == b_policy), None)
                    if la in pol and lb is not None and lb != la:
                        row["against"] = lb
                        xa.append(float(shown(metric, pol[la].get(metric)) if pol[la].get(metric) is not None else np.nan))
                        xb.append(float(shown(metric, pol[lb].get(metric)) if pol[lb].get(metric) is not None else np.nan))
                if not xa:
                    continue
                d = np.asarray(xa) - np.asarray(xb)
                pt = paired_test(xa, xb)
                row["seeds"] = int(np.isfinite(d).sum())
                row[f"{name} diff"] = _ci(d, "{:+.2f}")
                row[f"{name} p"] = "-" if pt is None or not np.isfinite(pt.t_p) else f"{pt.t_p:.2g}"
            if row["against"] is not None:
                rows.append(row)
    return pd.DataFrame(rows)


def markdown(runs: list, comparisons: list, sums: pd.DataFrame, out: Path) -> list[str]:
    lines: list[str] = []
    param = capacity_param(sums) if len(sums) else None
    if param is not None:
        availability_plot(sums, param, out / "renewable_availability.png")
        lines += ["## Renewable availability: what placement can save, and what the policies save", "",
                  "Swept: renewable capacity per site. The pooled bound is the non-renewable energy static's "
                  "demand needs even if every site's renewable power could feed any site at no cost (a sum over "
                  "steps of max(0, total demand - total renewable)). `1 - bound / static` is the most that "
                  "placement alone can save against static. Each value is the mean per-seed value with its 95 % "
                  "CI. The paper's -52 % can be reproduced only where it is attainable.", "",
                  md_table(availability_table(sums, param)), "", "![renewable availability](renewable_availability.png)", ""]
    moved = paired_split(runs, comparisons, "feasibility_aware", "placement_only")
    if len(moved):
        lines += ["## What migration adds: feasibility_aware vs placement_only", "",
                  "`placement_only` places each new job exactly as the migrating policies do and never migrates, "
                  "so this difference is the migrations' own effect, with initial placement held equal (against "
                  "`static` both count). Each cell is a per-seed difference (feasibility_aware - placement_only), "
                  "mean [95 % CI], with the paired t-test's p.", "", md_table(moved), ""]
    filt = paired_split(runs, comparisons, "feasibility_aware", "energy_only")
    if len(filt):
        lines += ["## What the filter does: feasibility_aware vs energy_only", "",
                  "The same seeds with and without Eq. 1's filter, separated into energy, JCT, overruns and "
                  "migrations. Each cell is a per-seed difference (feasibility_aware - energy_only), mean "
                  "[95 % CI], with the paired t-test's p.", "", md_table(filt), ""]
    classes = paired_split(runs, comparisons, "feasibility_classes", "feasibility_aware")
    if len(classes):
        lines += ["## Class rule vs Eq. 1: the paper's fixed 60/300 s classes in place of Eq. 1", "",
                  "Each `feasibility_classes` policy against `feasibility_aware` on the same seeds. Each cell is "
                  "a per-seed difference (classes - Eq. 1), mean [95 % CI], with the paired t-test's p.", "",
                  md_table(classes), ""]
    return lines
