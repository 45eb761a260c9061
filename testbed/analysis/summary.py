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
    "grid_kwh_per_gpu_h", "jobs_total", "jobs_completed", "mean_jct_s", "median_jct_s", "p95_jct_s",
    "mean_queue_wait_s", "migrations", "migrations_completed", "migrations_unfinished",
    "migrations_predicted_feasible", "migrations_overran", "migrations_outside_window", "migrations_without_window",
    "migration_overhead_frac", "max_breakeven_s", "migrations_returned_1h",
) + SIGNAL_COLUMNS + BATTERY_COLUMNS

WINDOW = "window"  # migrations.parquet's trigger of a move made for a renewable window (controller.records.WINDOW)

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


def has_battery(ts: pd.DataFrame) -> bool:
    """Whether any site of the run has a battery (its state of charge is NaN where none)."""
    return "battery_soc_kwh" in ts.columns and bool(ts["battery_soc_kwh"].notna().any())


def _sum(ts: pd.DataFrame, column: str) -> float:
    """NaN-aware sum of a timeseries column (a missing value adds nothing; no column: 0)."""
    if column not in ts.columns:
        return 0.0
    return float(pd.to_numeric(ts[column], errors="coerce").sum(skipna=True))


def _signal_total(ts: pd.DataFrame, column: str) -> float | None:
    """Sum of a carbon / cost column over the steps that have the signal (None: no trace at all)."""
    if column not in ts.columns or not ts[column].notna().any():
        return None
    return _sum(ts, column)


def grid_signal_metrics(ts: pd.DataFrame, *, battery: bool | None = None) -> dict:
    """``co2_kg`` and ``grid_cost`` of the grid energy where the scenario has carbon / price traces,
    and the battery columns (charge, discharge, loss, curtailment) where a site of the run has a battery
    (``battery``: decided by the caller for the whole run, so that every site's row and the total carry
    them alike); absent keys: no such trace or battery. Every sum is NaN-aware."""
    out: dict = {}
    for key in SIGNAL_COLUMNS:
        total = _signal_total(ts, key)
        if total is not None:
            out[key] = total
    if has_battery(ts) if battery is None else battery:
        out.update({c: _sum(ts, c) for c in BATTERY_COLUMNS})
    return out


# The energy totals every table reports (summary.json, energy_by_site.csv's rows and total, comparison):
# output key -> the timeseries column it sums. Energy drawn closes as
#     total_kwh = renewable_kwh + battery_discharge_kwh + grid_kwh,
# renewable energy available as renewable_available_kwh = renewable_kwh + battery_charge_kwh + curtailed_kwh.
ENERGY_TOTALS = {
    "grid_kwh": "grid_kwh", "renewable_kwh": "renewable_used_kwh", "total_kwh": "demand_kwh",
    "renewable_available_kwh": "renewable_available_kwh",
    **{f"{part}_kwh": f"{part}_kwh" for part in ENERGY_PARTS},
    **{f"{part}_renewable_kwh": f"{part}_renewable_kwh" for part in ENERGY_PARTS},
    "overdraw_kwh": "overdraw_kwh",
}


def energy_totals(ts: pd.DataFrame, *, battery: bool | None = None) -> dict:
    """The energy totals of ``ts`` (a run's timeseries, or one site's rows of it): every key of
    :data:`ENERGY_TOTALS`, then CO2 and cost and the battery columns where they apply
    (:func:`grid_signal_metrics`). The one summing rule of every energy table: NaN-aware."""
    return {**{key: _sum(ts, column) for key, column in ENERGY_TOTALS.items()},
            **grid_signal_metrics(ts, battery=battery)}


def energy_by_site(ts: pd.DataFrame) -> pd.DataFrame:
    """Per site: compute / transfer / idle energy, each split into renewable and grid, and totals,
    with the battery's columns for every site where any site has a battery; the ``total`` row is the
    same sums over the whole run (:func:`energy_totals`, as summary.json), which the rows add up to."""
    battery = has_battery(ts)

    def row(d: pd.DataFrame) -> dict:
        t = energy_totals(d, battery=battery)
        out = {}
        for part in ENERGY_PARTS:
            tot, ren = t[f"{part}_kwh"], t[f"{part}_renewable_kwh"]
            out.update({f"{part}_kwh": tot, f"{part}_renewable_kwh": ren, f"{part}_grid_kwh": tot - ren})
        out.update({k: t[k] for k in ("total_kwh", "renewable_kwh", "grid_kwh", "renewable_available_kwh",
                                      "overdraw_kwh")})
        out.update({k: v for k, v in t.items() if k in SIGNAL_COLUMNS + BATTERY_COLUMNS})
        return out

    rows = [{"site": site, **row(d)} for site, d in ts.groupby("site", sort=True)]
    if not rows:
        return pd.DataFrame(rows)
    rows.append({"site": "total", **row(ts)})
    columns = list(dict.fromkeys(c for r in rows for c in r))  # a site without a signal: NaN there
    return pd.DataFrame(rows, columns=columns)


def has_window_budget(migs: pd.DataFrame) -> pd.Series:
    """Per migration: whether it was made for a renewable window and so has a budget (alpha x the
    window) it can overrun; a move on a grid signal (``trigger`` carbon / price) has none. Tables
    written before ``trigger`` hold window moves only."""
    if "trigger" not in migs.columns:
        return pd.Series(True, index=migs.index, dtype=bool)
    return (migs["trigger"].fillna(WINDOW) == WINDOW).astype(bool)


def migration_counts(migs: pd.DataFrame) -> dict:
    """The migrations' counts of summary.json: ``migrations_overran`` and ``migrations_outside_window``
    among the finished moves that had a window budget; ``migrations_without_window`` the moves made on
    a grid signal (never counted as overran: they had no budget)."""
    if not len(migs):
        return {"migrations": 0, "migrations_completed": 0, "migrations_unfinished": 0,
                "migrations_predicted_feasible": 0, "migrations_overran": 0, "migrations_outside_window": 0,
                "migrations_without_window": 0}
    window = has_window_budget(migs)
    judged = window & (migs["status"] != "unfinished")

    def flag(column: str) -> pd.Series:
        return migs[column].astype("boolean").fillna(False).astype(bool)

    return {
        "migrations": int(len(migs)),
        "migrations_completed": int((migs["status"] == "completed").sum()),
        "migrations_unfinished": int((migs["status"] == "unfinished").sum()),
        "migrations_predicted_feasible": int(flag("predicted_feasible").sum()),
        "migrations_overran": int((judged & flag("overran")).sum()),
        "migrations_outside_window": int((judged & ~migs["completed_in_window"].astype("boolean").fillna(True)
                                          .astype(bool)).sum()),
        "migrations_without_window": int((~window).sum()),
    }


def summarize(tables: dict[str, pd.DataFrame], *, policy: str, label: str) -> dict:
    ts, jobs, migs = tables["timeseries"], tables["jobs"], tables["migrations"]
    done = jobs[jobs["status"] == "completed"] if len(jobs) else jobs
    jct = done["jct_s"].to_numpy(dtype=float) if len(done) else np.array([])
    busy_s = float(jobs["running_s"].sum() + jobs["migrating_s"].sum()) if len(jobs) else 0.0
    work_done = float((jobs["work_gpu_h"] - jobs["work_left_gpu_h"]).sum()) if len(jobs) else 0.0
    energy = energy_totals(ts)
    non_ren = energy["grid_kwh"]
    green = energy["renewable_kwh"] + _sum(ts, "battery_discharge_kwh")  # a battery delivers renewable energy
    return {
        "policy": policy,
        "label": label,
        "grid_kwh": non_ren,
        "pooled_bound_grid_kwh": pooled_bound_kwh(ts),  # what no placement of this demand avoids
        **{k: energy[k] for k in ENERGY_TOTALS if k != "grid_kwh"},
        "capped_node_h": _capped_node_h(ts),
        "renewable_fraction": _f(green / energy["total_kwh"]) if len(ts) and energy["total_kwh"] else None,
        "work_done_gpu_h": work_done,
        "grid_kwh_per_gpu_h": non_ren / work_done if work_done > 0 else None,
        "jobs_total": int(len(jobs)),
        "jobs_completed": int(len(done)),
        "mean_jct_s": _f(jct.mean()) if jct.size else None,
        "median_jct_s": _f(np.median(jct)) if jct.size else None,
        "p95_jct_s": _f(np.percentile(jct, 95)) if jct.size else None,
        "mean_queue_wait_s": _f(jobs["queue_wait_s"].mean()) if len(jobs) else None,
        **migration_counts(migs),
        "migration_overhead_frac": float(jobs["migrating_s"].sum()) / busy_s if busy_s > 0 else 0.0,
        "max_breakeven_s": _f(migs["predicted_breakeven_s"].max()) if len(migs) else None,
        "migrations_returned_1h": returns_within(migs),
        **{k: v for k, v in energy.items() if k in SIGNAL_COLUMNS + BATTERY_COLUMNS},
    }
