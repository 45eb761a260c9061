"""Reading what happened to a migration from ``migrations.parquet``, on every substrate alike.

Emulated runs record measurements as ``actual_*`` columns. The sim substrate has nothing to
measure, so it files its modelled phases as ``model_*``. Readers that compare predictions with what
happened take whichever the run has.
"""

from __future__ import annotations


def outcome_s(m, what: str):
    """A ``migrations.parquet`` frame's realised ``what`` (transfer, load, downtime, total) in
    seconds: the measurement where there is one (``actual_*``), else the model's (``model_*``, sim).
    For readers that compare predictions with what happened on every substrate alike."""
    import pandas as pd

    cols = [c for c in (f"actual_{what}_s", f"model_{what}_s") if c in m.columns]
    if not cols:
        return pd.Series(float("nan"), index=m.index)
    out = pd.to_numeric(m[cols[0]], errors="coerce")
    for c in cols[1:]:
        out = out.fillna(pd.to_numeric(m[c], errors="coerce"))
    return out
