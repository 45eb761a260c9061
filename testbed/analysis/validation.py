"""Empirical validation of the feasibility model: what Eq. 1 predicted beside what happened.

Input: one or more result directories — single runs (``testbed run``) or sweeps (``testbed sweep``;
every done trial is a run) — gathered into one migrations table with the run's substrate, seed
and swept parameters. Output: the figures and tables ``testbed report`` puts in ``report.md``.

Predictions are re-derived from what the controller had at decision time (the checkpoint size
and the *predicted* bandwidth), in two variants, so the paper's arithmetic and our correction
are judged on the same migrations:
- ``plain``: the paper's ``8 S / B``;
- ``corrected``: ``8 S / (B x 1448/1514)`` (TCP goodput over a 1500-byte MTU).
Errors are relative: ``(predicted - actual) / actual``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from testbed.analysis.outcomes import outcome_s
from testbed.analysis.names import PARAM_PREFIX, TRIAL_DONE
from testbed.analysis.scenario_id import scenario_hash
from testbed.errors import TestbedError
from testbed.feasibility import TCP_EFFICIENCY_MTU1500, transfer_times_s
from testbed.recorder.reader import marker, trial_record
from testbed.analysis.figures import save as save_figure


class ReportError(TestbedError):
    """A directory given to ``testbed report`` is not a run or a sweep (the message names it)."""

    exit_code = 2  # bad input


@dataclass(frozen=True)
class Run:
    path: Path
    substrate: str
    seed: int
    scenario: str
    cell: str
    params: dict
    resolved: dict = field(default_factory=dict)  # the run's resolved scenario (manifest.json)
    overrides: dict = field(default_factory=dict)  # a sweep trial's field overrides (trial.json)
    # what the run is as an experiment: the hash of ``resolved`` without its seed
    # (testbed.analysis.scenario_id; filled in from ``resolved`` when not given; "" if none is recorded)
    scenario_hash: str = ""

    def __post_init__(self) -> None:
        if not self.scenario_hash:
            object.__setattr__(self, "scenario_hash", scenario_hash(self.resolved))


def _run_of(path: Path, cell: str = "", params: dict | None = None, overrides: dict | None = None) -> Run:
    man = marker(path, "run", check_format=False)
    sub = man.get("substrate") or {}
    scen = man.get("scenario") if isinstance(man.get("scenario"), dict) else {}
    resolved = scen.get("resolved") if isinstance(scen.get("resolved"), dict) else {}
    name = resolved.get("name") or Path(scen.get("path", "") or "").stem
    return Run(path, str(sub.get("substrate", "sim")), int(man.get("seed", 0)), name or path.name, cell, params or {},
               resolved, dict(overrides or {}))


def find_runs(directory: Path) -> list[Run]:
    """The runs in ``directory``: itself (a run) or the done trials of a sweep."""
    directory = Path(directory)
    if not directory.is_dir():
        raise ReportError(f"{directory}: not a directory")
    if (directory / "manifest.json").is_file():
        return [_run_of(directory)]
    if (directory / "trials.csv").is_file():
        trials = pd.read_csv(directory / "trials.csv", dtype={"cell": str, "dir": str})
        runs = []
        for _, t in trials[trials["status"].isin(TRIAL_DONE)].iterrows():
            meta = trial_record(directory / t["dir"])
            runs.append(_run_of(directory / t["dir"], str(t["cell"]), dict(meta.get("params") or {}),
                                dict(meta.get("overrides") or {})))
        if not runs:
            raise ReportError(f"{directory}: a sweep with no finished trial")
        return runs
    raise ReportError(f"{directory}: neither a run (manifest.json) nor a sweep (trials.csv)")


def gather(runs: list[Run]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(migrations, summaries): one row per migration / per run x policy, with run metadata: what
    ``testbed report`` renders from (testbed.analysis.report_data), for these runs alone."""
    from testbed.analysis.report_data import collect, derived_migrations

    data = collect([Path(".")], [list(runs)])
    return derived_migrations(data), data.summaries_frame()


def add_predictions(m: pd.DataFrame) -> pd.DataFrame:
    """Plain (8 S / B) and corrected transfer predictions, and relative errors against the actuals."""
    m = m.copy()
    bw = m["predicted_bandwidth_gbps"].astype(float)
    size = m["checkpoint_gb"].astype(float)
    m["predicted_transfer_plain_s"] = transfer_times_s(size, bw)
    m["predicted_transfer_corrected_s"] = transfer_times_s(size, bw, TCP_EFFICIENCY_MTU1500)
    fixed = m["predicted_load_s"].astype(float) + m["predicted_downtime_s"].astype(float)
    m["predicted_total_plain_s"] = m["predicted_transfer_plain_s"] + fixed
    m["predicted_total_corrected_s"] = m["predicted_transfer_corrected_s"] + fixed
    done = m["status"] == "completed"
    for what in ("transfer", "total"):
        actual = outcome_s(m, what).where(done)
        for var in ("plain", "corrected"):
            m[f"err_{what}_{var}"] = (m[f"predicted_{what}_{var}_s"] - actual) / actual
    return m


def add_concurrency(m: pd.DataFrame) -> pd.DataFrame:
    """``shared_site_overlaps``: how many other migrations of the same run and policy were in flight
    at the same time *and* shared a site with this one (their bytes compete for the same links);
    ``same_link_overlaps``: those of them on the same link (either direction). Eq. 1 assumes each
    transfer has its link to itself; emulation shows what sharing costs."""
    m = m.copy()
    m["shared_site_overlaps"] = 0
    m["same_link_overlaps"] = 0
    if not len(m):
        return m
    t0 = m["t_decision_s"].astype(float)
    t1 = t0 + outcome_s(m, "total").fillna(0.0)
    for _, g in m.groupby(["run", "label"], sort=False):
        idx = g.index.to_numpy()
        a0, a1 = t0[idx].to_numpy(), t1[idx].to_numpy()
        src, dst = g["src"].to_numpy(), g["dst"].to_numpy()
        for i, row in enumerate(idx):
            over = (a0 < a1[i]) & (a1 > a0[i])
            over[i] = False
            share = (src == src[i]) | (dst == dst[i]) | (src == dst[i]) | (dst == src[i])
            same = ((src == src[i]) & (dst == dst[i])) | ((src == dst[i]) & (dst == src[i]))
            m.at[row, "shared_site_overlaps"] = int((over & share).sum())
            m.at[row, "same_link_overlaps"] = int((over & same).sum())
    return m


# -- tables ------------------------------------------------------------------------------------------
def error_table(m: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Per group: migrations completed, median and p90 |relative error| of each prediction."""
    rows = []
    done = m[m["status"] == "completed"] if len(m) else m
    if not len(done):
        return pd.DataFrame()
    for key, g in done.groupby(by, sort=True, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        row = dict(zip(by, key))
        row["n"] = len(g)
        for col in ("err_transfer_plain", "err_transfer_corrected", "err_total_plain", "err_total_corrected"):
            e = g[col].abs().dropna()
            row[f"median_abs_{col[4:]}"] = float(e.median()) if len(e) else np.nan
            row[f"p90_abs_{col[4:]}"] = float(e.quantile(0.9)) if len(e) else np.nan
        rows.append(row)
    return pd.DataFrame(rows)


def confusion(m: pd.DataFrame, by: list[str] | None = None) -> pd.DataFrame:
    """Predicted feasible (Eq. 1, or the risk budget where it decided) vs actually completed within
    the budget, counted: tp (feasible, made it), fp (feasible, overran: the model's misses),
    fn (infeasible, would have made it), tn (infeasible, overran)."""
    if not len(m):
        return pd.DataFrame(columns=[*(by or []), "tp", "fp", "fn", "tn", "n", "precision"])
    pred = m["predicted_risk_feasible"].where(m["predicted_risk_feasible"].notna(), m["predicted_feasible"]).astype(bool)
    actual = m["within_budget"].fillna(False).astype(bool)
    d = m.assign(_p=pred, _a=actual)
    rows = []
    groups = d.groupby(by, sort=True, dropna=False) if by else [((), d)]
    for key, g in groups:
        key = key if isinstance(key, tuple) else (key,)
        tp = int((g["_p"] & g["_a"]).sum())
        fp = int((g["_p"] & ~g["_a"]).sum())
        fn = int((~g["_p"] & g["_a"]).sum())
        tn = int((~g["_p"] & ~g["_a"]).sum())
        rows.append({**dict(zip(by or [], key)), "tp": tp, "fp": fp, "fn": fn, "tn": tn, "n": len(g),
                     "precision": tp / (tp + fp) if tp + fp else np.nan})
    return pd.DataFrame(rows)


# -- figures -----------------------------------------------------------------------------------------
_COLOURS = {"plain": "#e65100", "corrected": "#1565c0"}


def realised_word(m: pd.DataFrame, what: str) -> str:
    """How ``what`` was realised in ``m``: ``measured`` (emulated), ``modelled`` (sim: never "actual"),
    or ``measured or modelled`` where both are."""
    from testbed.analysis.outcomes import basis

    kinds = set(basis(m, what).dropna()) if len(m) else set()
    return " or ".join(sorted(kinds, reverse=False)) if kinds else "realised"


def scatter_pred_vs_actual(m: pd.DataFrame, path: Path, title: str) -> Path:
    """Predicted vs realised transfer and total migration time (log-log, y = x), both predictions; the
    realised axis says whether it was measured (emulation) or modelled (sim)."""
    fig = Figure(figsize=(12, 5.4), layout="constrained")
    axes = fig.subplots(1, 2)
    done = m[m["status"] == "completed"] if len(m) else m
    subs = sorted(set(done["substrate"])) if len(done) and "substrate" in done else [None]
    for ax, what in zip(axes, ("transfer", "total")):
        if len(done):
            actual_all = outcome_s(done, what)
            for si, sub in enumerate(subs):
                d = done if sub is None else done[done["substrate"] == sub]
                for var, marker in (("plain", "x"), ("corrected", "o")):
                    name = "8S/B (paper)" if var == "plain" else "8S/(B x 0.956)"
                    colour = _COLOURS[var] if len(subs) == 1 else f"C{2 * si + (var == 'corrected')}"
                    ax.scatter(outcome_s(d, what), d[f"predicted_{what}_{var}_s"], s=14, marker=marker,
                               alpha=0.7, color=colour, label=name if sub is None or len(subs) == 1 else f"{sub}: {name}")
            lo = max(1e-1, float(min(actual_all.min(), done[f"predicted_{what}_plain_s"].min())) * 0.7)
            hi = float(max(actual_all.max(), done[f"predicted_{what}_corrected_s"].max())) * 1.4
            ax.plot([lo, hi], [lo, hi], color="black", lw=1, label="y = x")
            ax.set_xlim(lo, hi)
            ax.set_ylim(lo, hi)
            ax.set_xscale("log")
            ax.set_yscale("log")
        else:
            ax.text(0.5, 0.5, "no completed migration", ha="center", transform=ax.transAxes)
        word = realised_word(done, what)
        ax.set_xlabel(f"{word} {what} time (scenario s)")
        ax.set_ylabel(f"predicted {what} time (s)")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8, loc="upper left")
        ax.set_title(f"{what} time: predicted vs {word} (n={len(done)})", fontsize=10)
    fig.suptitle(title)
    return save_figure(fig, path, dpi=110)


_KIND_WORDS = {"none": "no degradation", "steady": "steady degradation", "event": "degradation event during the transfer",
               "swept": "degradation (swept)", "measured": "degradation (measured on the link)"}


def _substrate_words(sub: str) -> str:
    return "simulation (analytic)" if sub == "sim" else f"emulation ({sub})"


def error_cdf(m: pd.DataFrame, path: Path, title: str) -> Path:
    """CDFs of the transfer-time prediction error, one panel per substrate (simulation, each
    emulation) and degradation kind (none, steady, an event during the transfer), one colour per
    degradation level; solid: the TCP-corrected prediction, dashed: the paper's 8S/B."""
    from matplotlib.lines import Line2D

    done = m[m["status"] == "completed"] if len(m) else m
    kinds = done["degradation_kind"].fillna("none") if "degradation_kind" in done else pd.Series("none", index=done.index)
    levels = done["degradation_pct"].fillna(0.0) if "degradation_pct" in done else pd.Series(0.0, index=done.index)
    subs = sorted(set(done["substrate"])) if len(done) and "substrate" in done else []
    order = [k for k in ("none", "steady", "event", "swept", "measured") if k in set(kinds)]
    panels = [(s, k) for s in subs for k in order if ((done["substrate"] == s) & (kinds == k)).any()] or [(None, None)]
    cols = min(3, len(panels))
    rows = -(-len(panels) // cols)
    fig = Figure(figsize=(5.2 * cols, 4.0 * rows + 0.8), layout="constrained")
    axes = np.atleast_1d(fig.subplots(rows, cols, squeeze=False, sharex=True, sharey=True)).ravel()
    all_levels = sorted(set(levels.round(1)))
    colours = {lv: f"C{i}" for i, lv in enumerate(all_levels)}
    for ax, (sub, kind) in zip(axes, panels):
        ax.axvspan(-5, 5, color="#c8e6c9", alpha=0.5)
        ax.axvline(0, color="black", lw=0.8)
        if sub is None:
            ax.text(0.5, 0.5, "no completed migration", ha="center", transform=ax.transAxes)
            continue
        part = done[(done["substrate"] == sub) & (kinds == kind)]
        for lv in sorted(set(levels[part.index].round(1))):
            g = part[levels[part.index].round(1) == lv]
            for var, ls in (("corrected", "-"), ("plain", "--")):
                e = np.sort(g[f"err_transfer_{var}"].dropna().to_numpy() * 100.0)
                if e.size:
                    ax.step(e, np.arange(1, e.size + 1) / e.size, where="post", ls=ls, lw=1.5, color=colours[lv],
                            label=(f"{lv:g} % degradation" if kind != "none" else "undegraded") + f" (n={e.size})"
                            if var == "corrected" else None)
        ax.set_title(f"{_substrate_words(sub)}: {_KIND_WORDS.get(kind, kind)}", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="best")
    for ax in axes[len(panels):]:
        ax.set_axis_off()
    for ax in axes[:len(panels)]:
        ax.set_xlabel("prediction error (predicted - realised) / realised (%): measured on emulation, modelled on sim")
        ax.set_ylabel("fraction of completed migrations")
    style = [Line2D([], [], color="0.2", ls="-", label="TCP-corrected prediction 8S / (0.956 B)"),
             Line2D([], [], color="0.2", ls="--", label="paper's prediction 8S / B"),
             Line2D([], [], color="#c8e6c9", lw=8, label="within ±5 %")]
    fig.legend(handles=style, loc="outside lower center", ncols=3, fontsize=9, frameon=False)
    fig.suptitle(title)
    return save_figure(fig, path, dpi=110)


def confusion_plot(conf: pd.DataFrame, path: Path, title: str, label_col: str | None = None) -> Path:
    """One 2x2 matrix per row of ``conf`` (predicted feasible x within budget), counts in cells;
    meant for a few rows (one per policy and substrate): the first 12, the title says when there are more."""
    if len(conf) > 12:
        title = f"{title} (first 12 of {len(conf)}; all in the table)"
        conf = conf.head(12)
    n = max(1, len(conf))
    cols = min(4, n)
    rows = -(-n // cols)
    fig = Figure(figsize=(3.4 * cols, 3.1 * rows + 0.6), layout="constrained")
    axes = np.atleast_1d(fig.subplots(rows, cols, squeeze=False)).ravel()
    for ax, (_, r) in zip(axes, conf.iterrows()):
        mat = np.array([[r["tp"], r["fp"]], [r["fn"], r["tn"]]], dtype=float)
        ax.imshow(mat, cmap="Blues", vmin=0, vmax=max(1.0, mat.max()))
        for (i, j), val in np.ndenumerate(mat):
            ax.text(j, i, f"{int(val)}", ha="center", va="center", fontsize=13,
                    color="white" if val > mat.max() / 2 else "black")
        ax.set_xticks([0, 1], ["within\nbudget", "overran"])
        ax.set_yticks([0, 1], ["predicted\nfeasible", "predicted\ninfeasible"])
        ax.set_title(str(r[label_col]) if label_col else "all", fontsize=10)
    for ax in axes[len(conf):]:
        ax.set_axis_off()
    fig.suptitle(title)
    return save_figure(fig, path, dpi=110)


def by_level_plot(sums: pd.DataFrame, param: str, path: Path, title: str, split: str | None = None,
                  xlabel: str | None = None) -> Path:
    """Non-renewable energy and mean JCT per policy against a swept parameter, as the change vs
    ``static`` in the same run (paired per seed, so the workload's seed-to-seed spread cancels):
    mean and 95 % CI over seeds. One column of panels per value of ``split`` (e.g. the variant);
    the policies are offset a little along x so that their intervals do not hide each other."""
    from scipy import stats

    if split and split in sums and sums[split].notna().any():
        sums = sums.assign(**{split: sums[split].fillna("-")})  # runs without it: one more column, "-"
        splits = sorted(sums[split].unique(), key=str)
    else:
        splits = [None]
    fig = Figure(figsize=(max(9.0, 5.6 * len(splits) + 0.4), 8.4), layout="constrained")
    axes = fig.subplots(2, len(splits), squeeze=False, sharex=True, sharey="row")
    ref = sums[sums["policy"] == "static"] if "policy" in sums else sums.iloc[0:0]
    labels = sorted(lb for lb, g in sums.groupby("label") if not (g["policy"] == "static").all())
    colours = {lb: f"C{i}" for i, lb in enumerate(labels)}
    markers = dict(zip(labels, "osD^vP*X"))
    xs = np.sort(pd.to_numeric(sums[param], errors="coerce").dropna().unique())
    span = float(xs.max() - xs.min()) if xs.size > 1 else 1.0
    step = 0.025 * span
    for col, sv in enumerate(splits):
        part = sums if sv is None else sums[sums[split] == sv]
        for row, (metric, lab) in enumerate((("grid_kwh", "grid energy vs static (%)"),
                                             ("mean_jct_s", "mean JCT vs static (%)"))):
            ax = axes[row, col]
            if not len(ref):
                ax.text(0.5, 0.5, "no static policy to compare with", ha="center", transform=ax.transAxes)
                continue
            base = ref.set_index("run")[metric]
            for i, label in enumerate(labels):
                g = part[part["label"] == label]
                if not len(g):
                    continue
                rel = 100.0 * (g[metric].to_numpy(float) / base.reindex(g["run"]).to_numpy(float) - 1.0)
                d = pd.DataFrame({"x": pd.to_numeric(g[param], errors="coerce").to_numpy(float), "y": rel}).dropna()
                agg = d.groupby("x", sort=True)["y"].agg(["mean", "std", "count"])
                half = [stats.t.ppf(0.975, c - 1) * sd / np.sqrt(c) if c > 1 and np.isfinite(sd) else 0.0
                        for sd, c in zip(agg["std"], agg["count"])]
                offset = (i - (len(labels) - 1) / 2.0) * step
                if not len(agg):
                    continue
                lo_n, hi_n = int(agg["count"].min()), int(agg["count"].max())
                seeds = f"{lo_n}" if lo_n == hi_n else f"{lo_n}-{hi_n}"
                ax.errorbar(agg.index.to_numpy(float) + offset, agg["mean"], yerr=half, marker=markers[label],
                            ms=6, capsize=3, lw=1.2, color=colours[label],
                            label=f"{label} ({seeds} seed{'' if hi_n == 1 else 's'} per level)")
            ax.axhline(0, color="black", lw=0.8)
            ax.set_xticks(xs)
            ax.set_ylabel(lab)
            ax.grid(alpha=0.3)
            if row == 1:
                ax.set_xlabel(xlabel or param.removeprefix(PARAM_PREFIX))
            if sv is not None and row == 0:
                ax.set_title(f"{split.removeprefix(PARAM_PREFIX)}: {sv}", fontsize=10)
    handles, names = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, names, loc="outside lower center", ncols=min(2 if len(splits) == 1 else 4, max(1, len(names))),
               fontsize=9, frameon=False)
    fig.suptitle(title)
    return save_figure(fig, path, dpi=110)
