"""``testbed report DIR [DIR ...]``: one ``report.md`` with figures from runs and sweeps.

Sections: predicted vs actual migration times (scatter with y = x, error CDFs per substrate and
link condition, error tables, by concurrency and by host contention), predicted-feasible vs
completed-within-budget (panels per policy, tables per level), energy and JCT per policy at each
swept level, the normalised phase diagram (each migration against its own budget), the paper's
claims over seeds where a scenario reproduces the paper's setup (testbed.analysis.claims), sim vs
emulation per metric for runs that share scenario, seed and cell, and the sim transfer model
calibrated from clean emulated transfers, with CIs, or why none is proposed
(testbed.analysis.calibration).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from testbed.analysis import calibration, claims, federated_claims, grid_report, policy_effects
from testbed.analysis import validation as v
from testbed.analysis.summary import has_window_budget
from testbed.analysis.report_data import DATA_DIR
from testbed.analysis.figures import md_links
from testbed.analysis.markdown import md_table as _md_table
from testbed.analysis.names import PARAM_PREFIX
from testbed.analysis.params import param_path
from testbed.errors import SpecError
from testbed.recorder.reader import REPORT_FORMAT

METRICS = ("grid_kwh", "renewable_kwh", "mean_jct_s", "jobs_completed", "migrations", "migrations_overran",
           "migration_overhead_frac")


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


# What reading a damaged run or sweep directory raises (bad JSON/CSV/parquet, a missing column or file).
_UNREADABLE = (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError)


def build_report(dirs: list[Path], out: Path, title: str | None = None, argv: list[str] | None = None) -> Path:
    """Write the report into ``out`` atomically. ``out`` may be new, empty, or an earlier report (its
    marker report.json says so), and never one of ``dirs`` or a folder holding them
    (testbed/recorder/out_dir.py); returns the path of report.md. Beside it, ``data/`` keeps what it
    was derived from (testbed.analysis.report_data), so ``testbed report --check`` can re-derive it."""
    from datetime import datetime, timezone

    from testbed.analysis.figures import current_format
    from testbed.analysis.report_data import collect
    from testbed.recorder.manifest import git_state
    from testbed.recorder.out_dir import check_out_dir
    from testbed.recorder.writer import atomic_dir, write_json

    check_out_dir(out, kind="report", force=True, protect=dirs)
    per_dir = []
    for d in dirs:
        try:
            per_dir.append(v.find_runs(Path(d)))
        except SpecError as e:  # a marker or trial record that does not read (recorder/reader.py names the file)
            where, why = e.problems[0] if e.problems else (str(d), type(e).__name__)
            raise v.ReportError(f"{d}: not a readable run or sweep ({Path(where).name}: {why})") from None
        except _UNREADABLE as e:  # a damaged or foreign directory: name it, never echo its files
            raise v.ReportError(f"{d}: not a readable run or sweep ({type(e).__name__})") from None
    from testbed.analysis.groups import check_groups  # seeds are pooled only within one experiment

    check_groups([r for rs in per_dir for r in rs])
    try:
        data = collect(list(dirs), per_dir)
    except _UNREADABLE as e:
        raise v.ReportError(f"{', '.join(str(d) for d in dirs)}: a run's tables are not readable "
                            f"({type(e).__name__})") from None
    title = title or f"Validation report: {', '.join(str(d) for d in dirs)}"
    with atomic_dir(out, True, kind="report", protect=dirs) as tmp:
        render(data, tmp, title)
        data.save(tmp / DATA_DIR)
        write_json(tmp / "report.json", {"format": REPORT_FORMAT, "title": title, "inputs": [str(d) for d in dirs],
                                         "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                                         "command": list(argv or []), "git": git_state(),
                                         **({"figure_format": current_format()} if current_format() != "png" else {})})
    return Path(out) / "report.md"


def render(data, out: Path, title: str) -> None:
    """Every table, figure and verdict of the report, from ``data`` (a report_data.ReportData) only."""
    from testbed.analysis.report_data import comparisons, derived_migrations

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="No artists with labels found")  # an empty panel: said in it
        _write_report(data, derived_migrations(data), data.summaries_frame(), comparisons(data), out, title)


def _write_report(data, m: pd.DataFrame, sums: pd.DataFrame, comps: list, out: Path, title: str) -> None:
    all_runs = data.runs
    fed = [r for r in all_runs if federated_claims.is_federated(r)]
    runs = [r for r in all_runs if not federated_claims.is_federated(r)]
    fed_comps = [c for r, c in zip(all_runs, comps) if federated_claims.is_federated(r)]
    comps = [c for r, c in zip(all_runs, comps) if not federated_claims.is_federated(r)]
    params = [c for c in sums.columns if c.startswith(PARAM_PREFIX) and sums[c].nunique(dropna=True) > 1]
    numeric = [c for c in params
               if pd.to_numeric(sums[c].dropna(), errors="coerce").notna().all() and sums[c].dropna().nunique() > 1]
    subs = sorted(set(sums["substrate"])) if len(sums) else []
    lines = [f"# {title}", "",
             f"- runs: {len(runs)} of the migration study (substrates: {', '.join(subs) or '-'})"
             + (f", {len(fed)} of the federated study" if fed else "") + "; policies: "
             f"{', '.join(sorted(set(sums['label']))) if len(sums) else '-'}",
             f"- migrations: {len(m)}, completed: {int((m['status'] == 'completed').sum()) if len(m) else 0}",
             f"- swept: {', '.join(param_path(p, all_runs) for p in params) or 'nothing'}", ""]

    if fed and not runs:  # federated runs only: the migration study's sections have nothing to show
        lines += federated_claims.markdown(fed, fed_comps, out)
        sums.to_csv(out / "summaries.csv", index=False)
        (out / "report.md").write_text(md_links("\n".join(lines)), encoding="utf-8")
        return
    lines += ["## Predicted vs actual migration time", "",
              "Both predictions use only what the controller had (size, predicted bandwidth): the paper's `8S/B` "
              "and the same with TCP's protocol efficiency (1448/1514). Points below y = x were predicted too "
              "fast. `err` = (predicted - actual) / actual.", ""]
    v.scatter_pred_vs_actual(m, out / "pred_vs_actual.png",
                             f"Predicted vs {v.realised_word(m, 'total')} (all completed migrations)")
    lines += ["![predicted vs actual](pred_vs_actual.png)", ""]
    v.error_cdf(m, out / "error_cdf.png", "Transfer-time prediction error, per substrate and link condition")
    lines += ["Error CDFs per substrate and per link condition of each migration (no degradation, steady "
              "degradation, a degradation event during the transfer), one colour per degradation level:", "",
              "![error CDF](error_cdf.png)", ""]
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

    emulated = m[m["substrate"] != "sim"] if len(m) else m
    if len(emulated) and "contended" in emulated.columns and (emulated["status"] == "completed").any():
        flag = emulated["contended"].astype("boolean")
        host = np.where(flag.isna(), "not recorded", np.where(flag.fillna(False), "contended host", "quiet host"))
        both = pd.concat([emulated.assign(host=host), emulated[~flag.fillna(False).to_numpy(bool)].assign(
            host="all without contended")], ignore_index=True)
        cols = ["substrate", *params, "host", "n", "median_abs_transfer_corrected", "p90_abs_transfer_corrected"]
        lines += ["Emulated transfers measured while other load on the host took CPU (flagged `contended`) "
                  "change by tens of percent; |error| per host condition, and without the contended ones:", "",
                  _md_table(v.error_table(both, ["substrate", *params, "host"])[cols]), ""]

    lines += ["## Predicted feasible vs completed within budget", "",
              "tp: predicted feasible and made it; **fp: predicted feasible and overran (the model's misses, "
              "counted)**; fn: predicted infeasible but would have made it (only `no_filter` and `energy_only` "
              "take those); tn: predicted infeasible and overran. The risk-budget verdict is used where a "
              "policy decided with it.", ""]
    conf_by = ["substrate", "label", *params]
    judged = m[has_window_budget(m)] if len(m) else m  # a move on a grid signal had no window budget to judge
    if len(judged) < len(m):
        lines[-2] += (f" The {len(m) - len(judged)} moves made on a grid signal (carbon, price: `trigger` in "
                      "migrations.parquet) had no renewable window and so no budget: they are left out here and in "
                      "the phase diagram.")
    conf = v.confusion(judged, conf_by)
    pooled = v.confusion(judged, ["substrate", "label"])
    if len(pooled):
        pooled["group"] = pooled["label"].astype(str) + np.where(pooled["substrate"].nunique() > 1,
                                                                 " (" + pooled["substrate"].astype(str) + ")", "")
        v.confusion_plot(pooled, out / "confusion.png", "Predicted feasible vs within budget, per policy "
                         + ("and substrate" if pooled["substrate"].nunique() > 1 else f"({pooled['substrate'].iloc[0]})")
                         + (", all levels pooled" if params else ""), "group")
        lines += ["Per policy" + (", all swept levels pooled:" if params else ":"), "",
                  _md_table(pooled.drop(columns=["group"])), "", "![confusion](confusion.png)", ""]
    if params:
        lines += ["Per policy and swept level:", "", _md_table(conf), ""]

    if numeric and len(sums):
        from testbed.analysis.params import axis_label, file_stem

        lines += ["## Energy and JCT per policy at each level", "",
                  "One figure per input directory (a sweep, or a run) and swept quantity, so that seeds are "
                  "pooled only within one scenario and substrate.", ""]
        source = sums["run"].map(lambda i: data.sources[int(i)])
        for src in sorted(set(source)):
            one = sums[source == src]
            drawn: list[pd.Series] = []
            for p in numeric:
                values = pd.to_numeric(one[p], errors="coerce")
                if values.dropna().nunique() < 2 or any(values.equals(d) for d in drawn):  # not swept here, or
                    continue                                             # a zipped axis: the same levels again
                drawn.append(values)
                multi = len(set(source)) > 1
                f = out / (f"by_level_{file_stem(src)}_{file_stem(p)}.png" if multi else f"by_level_{file_stem(p)}.png")
                others = [q for q in params if q != p and q not in numeric and one[q].nunique(dropna=True) > 1]
                quantity = axis_label(p, runs)
                v.by_level_plot(one[values.notna()].assign(**{p: values.dropna()}), p, f,
                                f"Change vs static at each {quantity}\n"
                                "(paired per seed; mean and 95 % CI over seeds)",
                                split=others[0] if others else None, xlabel=quantity)
                lines += ([f"`{src}`:", ""] if multi else []) + [f"![by level]({f.name})", ""]

    if len(judged):
        from testbed.analysis.phase_diagram import plot_normalised_phase

        plot_normalised_phase(out / "phase_diagram.png", judged)
        lines += ["## Phase diagram with the measured migrations", "",
                  "Each migration against its own budget: x = its predicted total time / (alpha x its predicted "
                  "window), y = its actual total time / (alpha x its true window). Eq. 1's boundary is 1 on both "
                  "axes: left of 1 the model said feasible, below 1 it made it; top-left are the model's misses.", "",
                  "![phase diagram](phase_diagram.png)", ""]

    lines += claims.markdown(runs, comps)
    lines += policy_effects.markdown(runs, comps, sums, out)
    lines += federated_claims.markdown(fed, fed_comps, out)
    lines += grid_report.markdown(sums)
    from testbed.analysis import alpha_frontier, calibrated_predictor, error_terms  # error terms, alpha trade-off

    lines += error_terms.markdown(m, out) + calibrated_predictor.markdown(m)
    from testbed.analysis import cross_traffic_report  # issue #33: predictor x cross-traffic load

    lines += cross_traffic_report.markdown(m, {i: r.scenario for i, r in enumerate(all_runs)})
    lines += alpha_frontier.markdown(sums, runs, out)
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
    (out / "report.md").write_text(md_links("\n".join(lines)), encoding="utf-8")
