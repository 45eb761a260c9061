"""Names of summary quantities that changed, so that results written before a rename still read.

Grid energy is ``grid_kwh`` everywhere (per step in ``timeseries.parquet``, per site in
``energy_by_site.csv``, per run in ``summary.json``); summaries and comparisons written before
said ``non_renewable_kwh``; the federated study's summaries, rounds and sites said
``energy_grid_kwh`` and ``energy_renewable_kwh`` for ``grid_kwh`` and ``renewable_kwh``. Readers of ``summary.json``, sweep metrics and comparison tables pass
what they read through :func:`current` / :func:`current_name`.

A checkpoint's size is ``checkpoint_gb`` in every table (the jobs' submissions, the migrations
that move them); ``migrations.parquet`` written before called it ``size_gb``. Readers of a run's
tables pass each frame through :func:`current_columns`, which also brings durations written in
another unit to today's (jobs' ``jct_h`` / ``queue_wait_h`` are ``jct_s`` / ``queue_wait_s``, a
migration's ``predicted_breakeven_min`` is ``predicted_breakeven_s``) and a job that ran to its end
from ``done`` to ``completed``.

A migration's outcome is ``outcome_*`` with ``outcome_basis`` (``measured`` or ``modelled``) on every
substrate; ``actual_*`` holds measurements only. Migrations written before filed a modelled phase as
``model_*`` and a measured one only as ``actual_*``: :func:`current_columns` derives today's
``outcome_*`` from them and drops ``model_*`` (noted once per process on the ``testbed`` logger)."""

from __future__ import annotations

import logging
import re

_LOG = logging.getLogger("testbed")
_OUTCOME_QUANTITIES = ("checkpoint_s", "transfer_s", "load_s", "downtime_s", "total_s", "goodput_gbps")
_noted: set[str] = set()

RENAMED: dict[str, str] = {
    "non_renewable_kwh": "grid_kwh",
    "pooled_bound_non_renewable_kwh": "pooled_bound_grid_kwh",
    "non_renewable_kwh_per_gpu_h": "grid_kwh_per_gpu_h",
    "non_renewable_change_vs_static_pct": "grid_change_vs_static_pct",
    "non_renewable_per_gpu_h_change_vs_static_pct": "grid_per_gpu_h_change_vs_static_pct",
    "energy_grid_kwh": "grid_kwh",            # federated
    "energy_renewable_kwh": "renewable_kwh",  # federated
}

# A summary key written in another unit before -> (today's name, factor to today's unit): every
# duration of every output is in seconds (the jobs' ``jct_s`` and a summary's ``mean_jct_s``).
CONVERTED: dict[str, tuple[str, float]] = {
    **{f"{k}_h": (f"{k}_s", 3600.0) for k in ("mean_jct", "median_jct", "p95_jct", "mean_queue_wait",
                                              "mean_jct_common", "end_time", "time_to_accuracy")},
    "max_breakeven_min": ("max_breakeven_s", 60.0),
}

# Per-policy table (``<label>/<table>.parquet``) -> its columns' old names -> today's names.
RENAMED_COLUMNS: dict[str, dict[str, str]] = {
    "jobs": {"n_migrations": "migrations"},
    "migrations": {"size_gb": "checkpoint_gb", "actual_checkpoint_bytes": "checkpoint_file_bytes"},
    "rounds": {"energy_grid_kwh": "grid_kwh", "energy_renewable_kwh": "renewable_kwh"},
    "sites": {"energy_grid_kwh": "grid_kwh", "energy_renewable_kwh": "renewable_kwh",
              "down_pred_s": "predicted_down_s", "up_pred_s": "predicted_up_s"},
}

# Per-policy table -> a column written in another unit before -> (today's name, factor to today's unit).
CONVERTED_COLUMNS: dict[str, dict[str, tuple[str, float]]] = {
    "jobs": {"jct_h": ("jct_s", 3600.0), "queue_wait_h": ("queue_wait_s", 3600.0)},
    "migrations": {"predicted_breakeven_min": ("predicted_breakeven_s", 60.0)},
}

# Per-policy table -> its ``status`` words of before -> today's.
RENAMED_STATUS: dict[str, dict[str, str]] = {"jobs": {"done": "completed"}}

# Per-policy table -> the dtype today's recorder writes for each column an older one left untyped when
# it held no value (``object``, every value None); tests/unit/recorder/test_output_tables.py checks them
# against the recorder's dtypes (testbed/controller/records.py).
_F, _I, _B = "float64", "Int64", "boolean"
UNTYPED_BEFORE: dict[str, dict[str, str]] = {
    "migrations": {
        **dict.fromkeys(("actual_checkpoint_s", "actual_transfer_s", "actual_load_s", "actual_downtime_s",
                         "actual_total_s", "actual_goodput_gbps", "save_mb_per_s", "load_mb_per_s", "start_lag_s",
                         "control_s", "host_cpu_cores", "own_cpu_cores", "other_cpu_cores", "steal_cpu_cores",
                         "p_window_ok"), _F),
        **dict.fromkeys(("checkpoint_file_bytes", "measured_io_bytes"), _I),
        **dict.fromkeys(("contended", "completed_in_window", "within_budget", "overran", "predicted_feasible",
                         "predicted_risk_feasible"), _B),
    },
}


# A sweep trial whose run completed (trials.csv, trial.json): the word jobs and migrations use;
# trials recorded before said "done", which is still read as completed.
TRIAL_COMPLETED = "completed"
TRIAL_DONE = frozenset({TRIAL_COMPLETED, "done"})


PARAM_PREFIX = "param_"


def param_column(path: str) -> str:
    """The column of a swept parameter (an override path such as ``policies[fa].alpha``, or a sweep's
    ``$variable``) in every table that has one (a sweep's ``results``/``table``, a report's
    ``summaries.csv`` and ``migrations.parquet``): ``param_`` and the path with every run of other
    characters than letters and digits as one ``_`` (``param_policies_fa_alpha``), a Python identifier
    that ``df.query`` and attribute access take. Tables written before named the column by the path
    itself (sweeps) or ``param:<path>`` (reports): :func:`param_columns_current` renames them."""
    return PARAM_PREFIX + (re.sub(r"[^A-Za-z0-9]+", "_", path.removeprefix("param:")).strip("_") or "param")


def param_columns_current(df, paths):
    """``df`` (a sweep's results or statistics table, a report's table) with the columns of the swept
    parameters ``paths`` renamed from their old names (the path, or ``param:<path>``) to
    :func:`param_column`'s (a column already under its new name wins)."""
    old = {}
    for path in paths:
        new = param_column(path)
        for name in (path, f"param:{path}"):
            if name in df.columns and new not in df.columns and name != new:
                old[name] = new
    return df.rename(columns=old) if old else df


def current_name(name: str) -> str:
    """Today's name of a summary key or sweep metric (``name`` itself if it was never renamed)."""
    return CONVERTED[name][0] if name in CONVERTED else RENAMED.get(name, name)


def factor_to_today(name: str) -> float:
    """What a value written under ``name`` is multiplied by to be in today's unit (1: the same unit)."""
    return CONVERTED[name][1] if name in CONVERTED else 1.0


def current(summary: dict) -> dict:
    """``summary`` with today's names and units (a key already under its new name wins)."""
    out = {k: v for k, v in summary.items() if k not in RENAMED and k not in CONVERTED}
    for old, new in RENAMED.items():
        if old in summary and new not in out:
            out[new] = summary[old]
    for old, (new, factor) in CONVERTED.items():
        if old in summary and new not in out:
            v = summary[old]
            out[new] = v * factor if isinstance(v, (int, float)) and not isinstance(v, bool) else v
    return out


def current_columns(table: str, df):
    """``df``, a run's ``table`` (``"migrations"``, ...), with today's column names, units and status
    words (a column already under its new name wins; the frame is returned as is when nothing changed)."""
    if table == "migrations" and "outcome_total_s" not in df.columns and (
            "model_total_s" in df.columns or "actual_total_s" in df.columns):
        df = _outcomes_from_model_and_actual(df)
    old = {o: n for o, n in RENAMED_COLUMNS.get(table, {}).items() if o in df.columns}
    converted = {o: nf for o, nf in CONVERTED_COLUMNS.get(table, {}).items() if o in df.columns}
    words = {o: n for o, n in RENAMED_STATUS.get(table, {}).items()
             if "status" in df.columns and (df["status"] == o).any()}
    if not (old or converted or words):
        return df
    df = df.copy()
    for o, (n, factor) in converted.items():
        if n not in df.columns:
            df[o] = df[o] * factor
        old[o] = n
    keep = {o: n for o, n in old.items() if n not in df.columns}
    df = df.drop(columns=[o for o in old if o not in keep]).rename(columns=keep)
    if words:
        df["status"] = df["status"].replace(words)
    return df


def _outcomes_from_model_and_actual(df):
    """Migrations written before ``outcome_*``: each outcome is the measurement (``actual_*``) where
    there is one, else the model's (``model_*``); the basis is ``measured`` where the total was."""
    import numpy as np
    import pandas as pd

    if "model_*" not in _noted:
        _noted.add("model_*")
        _LOG.info("migrations written before outcome_* (model_* / actual_*) are read as outcome_* with "
                  "outcome_basis; model_* is deprecated")
    df = df.copy()
    for q in _OUTCOME_QUANTITIES:
        measured = pd.to_numeric(df.get(f"actual_{q}", pd.Series(np.nan, index=df.index)), errors="coerce")
        modelled = pd.to_numeric(df.get(f"model_{q}", pd.Series(np.nan, index=df.index)), errors="coerce")
        df[f"outcome_{q}"] = measured.fillna(modelled).astype("float64")
    actual_total = pd.to_numeric(df.get("actual_total_s", pd.Series(np.nan, index=df.index)), errors="coerce")
    basis = pd.Series(None, index=df.index, dtype=object)
    basis[df["outcome_total_s"].notna()] = "modelled"
    basis[actual_total.notna()] = "measured"
    df["outcome_basis"] = basis.astype("str")  # as the recorder writes it (missing: NaN)
    return df.drop(columns=[c for c in df.columns if c.startswith("model_") and c[6:] in _OUTCOME_QUANTITIES])


def typed_as_today(table: str, df):
    """``df``, a run's ``table``, with the columns an older recorder left untyped (:data:`UNTYPED_BEFORE`)
    cast to today's dtype; a value that dtype cannot hold leaves the frame as written."""
    loose = {c: t for c, t in UNTYPED_BEFORE.get(table, {}).items() if c in df.columns and df[c].dtype == object}
    if not loose:
        return df
    from testbed.recorder.tables import typed

    try:
        return typed(df, loose)
    except (TypeError, ValueError):
        return df
