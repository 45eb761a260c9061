"""The report's carbon and cost section: ``co2_kg`` and ``grid_cost`` per policy, where runs have them."""

from __future__ import annotations

import pandas as pd

from testbed.analysis.markdown import md_table

KEYS = ("co2_kg", "grid_cost")


def table(sums: pd.DataFrame) -> pd.DataFrame | None:
    """Per substrate and policy label: runs, mean and range of ``co2_kg`` / ``grid_cost`` (None: no run has them)."""
    keys = [k for k in KEYS if k in sums.columns and sums[k].notna().any()]
    if not keys or not len(sums):
        return None
    have = sums[sums[keys].notna().any(axis=1)]
    rows = []
    for (sub, label), g in have.groupby(["substrate", "label"], sort=True):
        row = {"substrate": sub, "label": label, "runs": len(g)}
        for k in keys:
            v = pd.to_numeric(g[k], errors="coerce").dropna()
            row.update({f"mean_{k}": float(v.mean()) if len(v) else None,
                        f"min_{k}": float(v.min()) if len(v) else None, f"max_{k}": float(v.max()) if len(v) else None})
        rows.append(row)
    return pd.DataFrame(rows)


def markdown(sums: pd.DataFrame) -> list[str]:
    t = table(sums)
    if t is None:
        return []
    return ["## Carbon and cost of grid energy", "",
            "Runs whose scenario has carbon-intensity (`traces.carbon`) or price (`traces.price`) traces: "
            "`co2_kg` = sum over steps and sites of grid kWh x the step's mean intensity (gCO2/kWh) / 1000; "
            "`grid_cost` = grid kWh x the step's mean price (the currency is the run manifest's "
            "`grid_signals.currency`). Mean and range over the runs of each policy:", "", md_table(t), ""]
