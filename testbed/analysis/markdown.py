"""Markdown tables for report.md."""

from __future__ import annotations

import numpy as np
import pandas as pd


def md_table(df: pd.DataFrame, digits: int = 3) -> str:
    if df is None or not len(df):
        return "_(none)_\n"
    cols = list(df.columns)
    out = ["| " + " | ".join(map(str, cols)) + " |", "|" + "---|" * len(cols)]  # as the data names them
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


def ci_cells(ci, unit: str, digits: int = 1, sign: str = "+") -> dict:
    """A claim row's ``mean`` and ``95 % CI`` cells of a stats.Interval (``-`` where there is none)."""
    if ci is None:
        return {"mean": "-", "95 % CI": "-"}
    span = "-" if ci.n < 2 else f"[{ci.lo:{sign}.{digits}f}, {ci.hi:{sign}.{digits}f}] {unit}"
    return {"mean": f"{ci.mean:{sign}.{digits}f} {unit}", "95 % CI": span}


def p_text(x: float) -> str:
    """A p-value in a table (``-`` where there is none)."""
    return "-" if not np.isfinite(x) else f"{x:.2g}"
