"""Per-policy summary metrics, computed from the recorded tables only (no live layers)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from testbed.analysis.bound import pooled_bound_kwh


def _f(x) -> float | None:
    return None if x is None or (isinstance(x, float) and np.isnan(x)) else float(x)


def _capped_node_h(ts: pd.DataFrame) -> float:
    """Node-hours that ran under a cap below the GPU's maximum (a throttled node)."""
    if not len(ts):
        return 0.0
    full = ts.groupby("site")["cap_w"].transform("max")
    capped = ts["cap_w"].notna() & (ts["cap_w"] < full - 1e-9)
    return float((ts.loc[capped, "running"] * ts.loc[capped, "dt_s"]).sum() / 3600.0)


ENERGY_PARTS = ("compute", "transfer", "idle")
BATTERY_COLUMNS = ("battery_charge_kwh", "battery_discharge_kwh", "battery_loss_kwh", "curtailed_kwh")
SIGNAL_COLUMNS = ("co2_kg", "grid_cost")  # where the scenario has carbon / price traces

# The numeric columns a migration run's ``summary.json`` can hold (what a sweep's ``metrics:`` may name):
# those :func:`summarize` always writes, then the grid-signal and battery ones it adds where they apply.
# tests/unit/test_summary_metrics.py checks them against docs/outputs.md and a run's summary.json.
SUMMARY_METRICS: tuple[str, ...] = (
    "grid_kwh", "pooled_bound_grid_kwh", "renewable_kwh", "total_kwh", "renewable_available_kwh",
    "compute_kwh", "transfer_kwh", "idle_kwh", "compute_renewable_kwh", "transfer_renewable_kwh",
    "idle_renewable_kwh", "overdraw_kwh", "capped_node_h", "renewable_fraction", "work_done_gpu_h",
    "grid_kwh_per_gpu_h", "jobs_total", "jobs_completed", "mean_jct_h", "median_jct_h", "p95_jct_h",
    "mean_queue_wait_h", "migrations", "migrations_completed", "migrations_unfinished",
    "migrations_predicted_feasible", "migrations_overran", "migrations_outside_window",
    "migration_overhead_frac", "max_breakeven_min", "migrations_returned_1h",
) + SIGNAL_COLUMNS + BATTERY_COLUMNS

RETURN_WINDOW_S = 3600.0  # a move back to the site a job left less than this long ago is a return (thrash)


def returns_within(migs: pd.DataFrame, window_s: float = RETURN_WINDOW_S) -> int:
    """Migrations that sent a job back to the site its previous migration took it from, decided less
    than ``window_s`` after that one (there and back again: what damping, ``min_dwell_h`` and
    ``return_margin``, prevents)."""
    if not len(migs):
        return 0
    n = 0
    for _, m in migs.sort_values(["job_id", "t_decision_s"], kind="stable").groupby("job_id", sort=False):
        src, dst, t = m["src"].to_numpy(), m["dst"].to_numpy(), m["t_decision_s"].to_numpy(dtype=float)
        n += int(((dst[1:] == src[:-1]) & (src[1:] == dst[:-1]) & (t[1:] - t[:-1] < window_s)).sum())
    return n


def _signal_total(ts: pd.DataFrame, column: str) -> float | None:
    """Sum of a carbon / cost column over the steps that have the signal (None: no trace at all)."""
    if column not in ts.columns or not ts[column].notna().any():
        return None
    return float(ts[column].sum(skipna=True))


def grid_signal_metrics(ts: pd.DataFrame) -> dict:
    """``co2_kg`` and ``grid_cost`` of the grid energy where the scenario has carbon / price traces,
    and the battery's energy where a site has one; absent keys: no such trace or battery."""
    out: dict = {}
    for key in SIGNAL_COLUMNS:
        total = _signal_total(ts, key)
        if total is not None:
            out[key] = total
    if "battery_soc_kwh" in ts.columns and ts["battery_soc_kwh"].notna().any():
        out.update({c: float(ts[c].sum()) for c in BATTERY_COLUMNS})
    return out


def energy_by_site(ts: pd.DataFrame) -> pd.DataFrame:
    """Per site: compute / transfer / idle energy, each split into renewable and grid, and totals.
    Rows sum to the ``total`` row exactly (pro-rata split, see the controller's SiteEnergy)."""
    rows = []
    for site, d in ts.groupby("site", sort=True):
        row = {"site": site}
        for part in ENERGY_PARTS:
            tot, ren = float(d[f"{part}_kwh"].sum()), float(d[f"{part}_renewable_kwh"].sum())
            row.update({f"{part}_kwh": tot, f"{part}_renewable_kwh": ren, f"{part}_grid_kwh": tot - ren})
        row.update({"total_kwh": float(d["demand_kwh"].sum()), "renewable_kwh": float(d["renewable_used_kwh"].sum()),
                    "grid_kwh": float(d["grid_kwh"].sum()),
                    "renewable_available_kwh": float(d["renewable_available_kwh"].sum()),
                    "overdraw_kwh": float(d["overdraw_kwh"].sum())})
        row.update(grid_signal_metrics(d))
        rows.append(row)
    df = pd.DataFrame(rows)
    if len(df):
        total = df.drop(columns="site").sum().to_dict()
        df = pd.concat([df, pd.DataFrame([{"site": "total", **total}])], ignore_index=True)
    return df


def summarize(tables: dict[str, pd.DataFrame], *, policy: str, label: str) -> dict:
    ts, jobs, migs = tables["timeseries"], tables["jobs"], tables["migrations"]
    done = jobs[jobs["status"] == "completed"] if len(jobs) else jobs
    jct = done["jct_s"].to_numpy(dtype=float) / 3600.0 if len(done) else np.array([])
    finished = migs[migs["status"] != "unfinished"] if len(migs) else migs
    busy_s = float(jobs["running_s"].sum() + jobs["migrating_s"].sum()) if len(jobs) else 0.0
    work_done = float((jobs["work_gpu_h"] - jobs["work_left_gpu_h"]).sum()) if len(jobs) else 0.0
    non_ren = float(ts["grid_kwh"].sum())
    green = float(ts["renewable_used_kwh"].sum()) + (float(ts["battery_discharge_kwh"].sum())
                                                      if "battery_discharge_kwh" in ts.columns else 0.0)
    return {
        "policy": policy,
        "label": label,
        "grid_kwh": non_ren,
        "pooled_bound_grid_kwh": pooled_bound_kwh(ts),  # what no placement of this demand avoids
        "renewable_kwh": float(ts["renewable_used_kwh"].sum()),
        "total_kwh": float(ts["demand_kwh"].sum()),
        "renewable_available_kwh": float(ts["renewable_available_kwh"].sum()),
        "compute_kwh": float(ts["compute_kwh"].sum()),
        "transfer_kwh": float(ts["transfer_kwh"].sum()),
        "idle_kwh": float(ts["idle_kwh"].sum()),
        "compute_renewable_kwh": float(ts["compute_renewable_kwh"].sum()),
        "transfer_renewable_kwh": float(ts["transfer_renewable_kwh"].sum()),
        "idle_renewable_kwh": float(ts["idle_renewable_kwh"].sum()),
        "overdraw_kwh": float(ts["overdraw_kwh"].sum()),
        "capped_node_h": _capped_node_h(ts),
        "renewable_fraction": _f(green / ts["demand_kwh"].sum()) if len(ts) else None,
        "work_done_gpu_h": work_done,
        "grid_kwh_per_gpu_h": non_ren / work_done if work_done > 0 else None,
        "jobs_total": int(len(jobs)),
        "jobs_completed": int(len(done)),
        "mean_jct_h": _f(jct.mean()) if jct.size else None,
        "median_jct_h": _f(np.median(jct)) if jct.size else None,
        "p95_jct_h": _f(np.percentile(jct, 95)) if jct.size else None,
        "mean_queue_wait_h": _f(jobs["queue_wait_s"].mean() / 3600.0) if len(jobs) else None,
        "migrations": int(len(migs)),
        "migrations_completed": int((migs["status"] == "completed").sum()) if len(migs) else 0,
        "migrations_unfinished": int((migs["status"] == "unfinished").sum()) if len(migs) else 0,
        "migrations_predicted_feasible": int(migs["predicted_feasible"].astype(bool).sum()) if len(migs) else 0,
        "migrations_overran": int(finished["overran"].astype(bool).sum()) if len(finished) else 0,
        "migrations_outside_window": int((~finished["completed_in_window"].astype(bool)).sum()) if len(finished) else 0,
        "migration_overhead_frac": float(jobs["migrating_s"].sum()) / busy_s if busy_s > 0 else 0.0,
        "max_breakeven_min": _f(migs["predicted_breakeven_s"].max() / 60.0) if len(migs) else None,
        "migrations_returned_1h": returns_within(migs),
        **grid_signal_metrics(ts),
    }
