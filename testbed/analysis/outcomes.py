"""Reading what happened to a migration from ``migrations.parquet``, on every substrate alike.

Every run files a migration's realised phases as ``outcome_*`` with ``outcome_basis`` (``measured``
on an emulated substrate, ``modelled`` on sim); ``actual_*`` holds the measured ones only. Frames
read through :func:`testbed.analysis.names.current_columns` have ``outcome_*`` also when they were
written before it (``model_*`` / ``actual_*``); these readers accept both.
"""

from __future__ import annotations

MEASURED, MODELLED = "measured", "modelled"


def _num(m, column: str):
    import pandas as pd

    if column not in m.columns:
        return pd.Series(float("nan"), index=m.index, dtype=float)
    return pd.to_numeric(m[column], errors="coerce").astype(float)


def outcome_s(m, what: str):
    """A ``migrations.parquet`` frame's realised ``what`` (checkpoint, transfer, load, downtime,
    total) in seconds: ``outcome_<what>_s``, or for a frame written before it, the measurement
    (``actual_*``) where there is one, else the model's (``model_*``)."""
    out = _num(m, f"outcome_{what}_s")
    for c in (f"actual_{what}_s", f"model_{what}_s"):
        out = out.fillna(_num(m, c))
    return out


def basis(m, what: str):
    """Per row, how ``what`` (a phase or ``total``) was obtained: ``measured`` where ``actual_<what>_s``
    holds a value, ``modelled`` where only the outcome does, else None."""
    import pandas as pd

    out = pd.Series(None, index=m.index, dtype=object)
    out[outcome_s(m, what).notna()] = MODELLED
    out[_num(m, f"actual_{what}_s").notna()] = MEASURED
    return out
