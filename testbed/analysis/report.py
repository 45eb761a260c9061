"""``testbed report DIR [DIR ...]``: one ``report.md`` with figures from runs and sweeps.

Sections: predicted vs actual migration times (scatter with y = x, error CDF, error table), the
confusion matrix of predicted-feasible vs completed-within-budget, non-renewable energy and mean
JCT per policy at each swept level, the phase diagram with the measured migrations, the seed's
claims beside what was measured per substrate (sim, netns, mininet) with verdicts, sim vs
emulation per metric for runs that share scenario, seed and cell, and the sim transfer model
calibrated from the emulated migrations.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from testbed.analysis import calibration, claims
from testbed.analysis import validation as v
from testbed.analysis.calibration import calibrate_transfer  # noqa: F401  (the report's calibration, by name)

METRICS = ("non_renewable_kwh", "renewable_kwh", "mean_jct_h", "jobs_completed", "migrations", "migrations_overran",
           "migration_overhead_frac")


def _md_table(df: pd.DataFrame, digits: int = 3) -> str:
    if df is None or not len(df):
        return "_(none)_\n"
    cols = list(df.columns)
    out = ["| " + " | ".join(str(c).removeprefix("param:") for c in cols) + " |", "|" + "---|" * len(cols)]
    for _, r in df.iterrows():
        cells = []
        for c in cols:
            x = r[c]
            if isinstance(x, (float, np.floating)):
                cells.append("-" if not np.isfinite(x) else f"{x:.{digits}g}")
            else:
                cells.append(str(x))
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def sim_vs_emulation(sums: pd.DataFrame) -> pd.DataFrame:
    """Per policy and metric: the sim value, the emulated value, and the difference, for runs
    sharing scenario cell and seed (means over those pairs)."""
    if sums.empty or sums["substrate"].nunique() < 2 or "sim" not in set(sums["substrate"]):
        return pd.DataFrame()
    key = ["cell", "seed", "label"]
    sim = sums[sums["substrate"] == "sim"].set_index(key)
    rows = []
    for sub in sorted(set(sums["substrate"]) - {"sim"}):
        emu = sums[sums["substrate"] == sub].set_index(key)
        common = sim.index.intersection(emu.index)
        if not len(common):
            continue
        for label in sorted({k[2] for k in common}):
            idx = [k for k in common if k[2] == label]
            for metric in METRICS:
                if metric not in sim or metric not in emu:
                    continue
                a = pd.to_numeric(sim.loc[idx, metric], errors="coerce").mean()
                b = pd.to_numeric(emu.loc[idx, metric], errors="coerce").mean()
                rows.append({"policy": label, "metric": metric, "substrate": sub, "sim": a, "emulated": b,
                             "diff": b - a, "diff %": 100.0 * (b - a) / a if a else np.nan, "pairs": len(idx)})
    return pd.DataFrame(rows)


REPORT_FORMAT = "testbed-report/1"
# What reading a damaged run or sweep directory raises (bad JSON/CSV/parquet, a missing column or file).
_UNREADABLE = (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError)


def build_report(dirs: list[Path], out: Path, title: str | None = None, argv: list[str] | None = None) -> Path:
    """Write the report into ``out`` atomically. ``out`` may be new, empty, or an earlier report (its
    marker report.json says so), and never one of ``dirs`` or a folder holding them
    (testbed/recorder/out_dir.py); returns the path of report.md."""
    from datetime import datetime, timezone

    from testbed.recorder.out_dir import check_out_dir
    from testbed.recorder.writer import atomic_dir, write_json

    check_out_dir(out, kind="report", force=True, protect=dirs)
    runs = []
    for d in dirs:
        try:
            runs += v.find_runs(Path(d))
        except _UNREADABLE as e:  # a damaged or foreign directory: name it, never echo its files
            raise v.ReportError(f"{d}: not a readable run or sweep ({type(e).__name__})") from None
    try:
        m, sums = v.gather(runs)
    except _UNREADABLE as e:
        raise v.ReportError(f"{', '.join(str(d) for d in dirs)}: a run's tables are not readable "
                            f"({type(e).__name__})") from None
    with atomic_dir(out, True, kind="report", protect=dirs) as tmp, warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="No artists with labels found")  # an empty panel: said in it
        _write_report(dirs, runs, m, sums, tmp, title)
        write_json(tmp / "report.json", {"format": REPORT_FORMAT, "inputs": [str(d) for d in dirs],
                                         "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                                         "command": list(argv or [])})
    return Path(out) / "report.md"


def _write_report(dirs: list[Path], runs: list, m: pd.DataFrame, sums: pd.DataFrame, out: Path,
                  title: str | None) -> None:
    params = [c for c in sums.columns if c.startswith("param:") and sums[c].nunique(dropna=True) > 1]
    numeric = [c for c in params
               if pd.to_numeric(sums[c].dropna(), errors="coerce").notna().all() and sums[c].dropna().nunique() > 1]
    subs = sorted(set(sums["substrate"])) if len(sums) else []
    title = title or f"Validation report: {', '.join(str(d) for d in dirs)}"
    lines = [f"# {title}", "",
             f"- runs: {len(runs)} (substrates: {', '.join(subs) or '-'}); policies: "
             f"{', '.join(sorted(set(sums['label']))) if len(sums) else '-'}",
             f"- migrations: {len(m)}, completed: {int((m['status'] == 'completed').sum()) if len(m) else 0}",
             f"- swept: {', '.join(p.removeprefix('param:') for p in params) or 'nothing'}", ""]

    lines += ["## Predicted vs actual migration time", "",
              "Both predictions use only what the controller had (size, predicted bandwidth): the paper's `8S/B` "
              "and the same with TCP's protocol efficiency (1448/1514). Points below y = x were predicted too "
              "fast. `err` = (predicted - actual) / actual.", ""]
    v.scatter_pred_vs_actual(m, out / "pred_vs_actual.png", "Predicted vs actual (all completed migrations)")
    lines += ["![predicted vs actual](pred_vs_actual.png)", ""]
    by_cdf = numeric[0] if numeric else ("substrate" if len(subs) > 1 else None)
    v.error_cdf(m, out / "error_cdf.png", "Transfer-time prediction error", by=by_cdf)
    lines += ["![error CDF](error_cdf.png)", ""]
    group = ["substrate", *params]
    lines += ["Median and 90th-percentile |error| per group:", "", _md_table(v.error_table(m, group) if len(m) else None), ""]

    if len(m):
        alone = m.assign(concurrency=np.where(m["shared_site_overlaps"] > 0, "shared a site with another transfer",
                                              "alone"))
        lines += ["Transfers in flight at the same time as another migration from or to one of their sites compete "
                  "for the same links; Eq. 1 assumes a link to itself. |error| by concurrency:", "",
                  _md_table(v.error_table(alone, ["substrate", *params, "concurrency"])[
                      ["substrate", *params, "concurrency", "n", "median_abs_transfer_corrected",
                       "p90_abs_transfer_corrected"]]
                      if (alone["status"] == "completed").any() else None), ""]

    lines += ["## Predicted feasible vs completed within budget", "",
              "tp: predicted feasible and made it; **fp: predicted feasible and overran (the model's misses, "
              "counted)**; fn: predicted infeasible but would have made it (only `no_filter` and `energy_only` "
              "take those); tn: predicted infeasible and overran. The risk-budget verdict is used where a "
              "policy decided with it.", ""]
    conf_by = ["substrate", "label", *params]
    conf = v.confusion(m, conf_by)
    if len(conf):
        def short(c: str) -> str:
            return c.removeprefix("param:").split(".")[-1]

        conf["group"] = conf.apply(lambda r: " / ".join([str(r["substrate"]), str(r["label"])]
                                                        + [f"{short(p)}={r[p]}" for p in params]), axis=1)
        v.confusion_plot(conf, out / "confusion.png", "Predicted feasible vs within budget", "group")
        lines += ["![confusion](confusion.png)", ""]
    lines += [_md_table(conf.drop(columns=["group"], errors="ignore") if len(conf) else conf), ""]

    if numeric and len(sums):
        lines += ["## Energy and JCT per policy at each level", ""]
        for p in numeric:
            name = p.removeprefix("param:").replace("[", "_").replace("]", "").replace(".", "_")
            f = out / f"by_level_{name}.png"
            others = [q for q in params if q != p and q not in numeric]
            v.by_level_plot(sums[sums[p].notna()].assign(**{p: pd.to_numeric(sums[p].dropna())}), p, f,
                            f"Change vs static at each {p.removeprefix('param:')} (paired per seed; mean, 95 % CI)",
                            split=others[0] if others else None)
            lines += [f"![by level]({f.name})", ""]

    if len(m):
        from testbed.analysis.phase_diagram import plot_phase_diagram
        from testbed.feasibility import FeasibilityParams

        window = float(m["predicted_window_s"].median())
        alpha = float(m["predicted_alpha"].median())
        pts = pd.DataFrame({"size_gb": m["size_gb"], "bandwidth_gbps": m["predicted_bandwidth_gbps"],
                            "completed_in_budget": m["within_budget"].fillna(False).astype(bool)})
        plot_phase_diagram(out / "phase_diagram.png", window, FeasibilityParams(alpha=alpha), points=pts)
        lines += ["## Phase diagram with the measured migrations", "",
                  f"Regions for the median predicted window ({window / 3600:.2f} h) and alpha {alpha:g}; each "
                  "migration at its size and predicted bandwidth, green if it completed within its true budget.", "",
                  "![phase diagram](phase_diagram.png)", ""]

    lines += claims.markdown(runs)
    svse = sim_vs_emulation(sums)
    if len(svse):
        lines += ["## Sim vs emulation", "", "Same scenario, cell and seed on both substrates: how far the analytic "
                  "substrate is from the emulated one.", "", _md_table(svse), ""]
    cal = calibration.calibrate(m)
    if cal is not None:
        lines += calibration.markdown(cal)
    if len(m):
        m.drop(columns=["candidates"], errors="ignore").to_parquet(out / "migrations.parquet", index=False)
    sums.to_csv(out / "summaries.csv", index=False)
    (out / "report.md").write_text("\n".join(lines), encoding="utf-8")
