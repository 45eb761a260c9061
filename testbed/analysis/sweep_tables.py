"""Reading a sweep's tables (``results.parquet`` / ``results.csv``, ``table.csv``) with today's column
names, whichever version wrote them.

Today a swept parameter's column is :func:`testbed.analysis.names.param_column` of its path
(``param_feasibility_alpha``; ``sweep.json`` keeps ``param_paths``: column -> path) and ``table.csv``
has the policy's name (``policy``) beside its entry's label (``label``). Sweeps written before named
a parameter's column by its path (``feasibility.alpha``), put the label under ``policy`` in
``table.csv`` and may have a metric under an older name or unit (``mean_jct_h``); they read as
today's (the policy's name taken from ``results``, a metric in today's unit)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from testbed.analysis.names import CONVERTED, RENAMED, current_name, factor_to_today, param_column, param_columns_current


def param_paths(folder: Path) -> dict[str, str]:
    """A sweep folder's parameter columns -> their paths (from ``sweep.json``; none if it has none)."""
    try:
        man = json.loads((Path(folder) / "sweep.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(man, dict):
        return {}
    paths = man.get("param_paths")
    if isinstance(paths, dict):
        return {str(c): str(p) for c, p in paths.items()}
    return {param_column(str(p)): str(p) for p in man.get("param_columns") or []}  # written before param_paths


def read_results(folder: Path) -> pd.DataFrame:
    """``results.parquet`` (else ``results.csv``) of a sweep folder, with today's names."""
    folder = Path(folder)
    pq = folder / "results.parquet"
    df = pd.read_parquet(pq) if pq.is_file() else pd.read_csv(folder / "results.csv", dtype={"cell": str})
    df = param_columns_current(df, param_paths(folder).values())
    old = [c for c in df.columns if (c in RENAMED or c in CONVERTED) and current_name(c) not in df.columns]
    if not old:
        return df
    df = df.copy()
    for c in old:  # a metric written under an older name or unit
        df[c] = df[c] * factor_to_today(c)
    return df.rename(columns={c: current_name(c) for c in old})


def read_table(folder: Path, results: pd.DataFrame | None = None) -> pd.DataFrame:
    """``table.csv`` of a sweep folder with today's names; a table written before ``label`` gets its
    ``policy`` names from ``results`` (read here when not given)."""
    folder = Path(folder)
    df = param_columns_current(pd.read_csv(folder / "table.csv", dtype={"cell": str}), param_paths(folder).values())
    old = df["metric"].isin(list(RENAMED) + list(CONVERTED)) if "metric" in df.columns else None
    if old is not None and old.any():  # a metric written under an older name or unit
        df = df.copy()
        factor = df["metric"].map(factor_to_today).where(old, 1.0)
        for c in ("mean", "std", "ci95"):
            df[c] = df[c] * factor
        df["metric"] = df["metric"].where(~old, df["metric"].map(current_name))
    if "label" in df.columns:
        return df
    if results is None:
        results = read_results(folder)
    names = dict(zip(results["label"], results["policy"])) if {"label", "policy"} <= set(results.columns) else {}
    df = df.rename(columns={"policy": "label"})
    df.insert(list(df.columns).index("label"), "policy", df["label"].map(names))
    return df
