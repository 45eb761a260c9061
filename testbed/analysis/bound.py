"""How much non-renewable energy no placement could avoid: the pooled-renewables bound.

For one run's time series (per site and step: ``demand_kwh``, ``renewable_available_kwh``)::

    pooled_bound_kwh = sum over steps of max(0, sum_s demand_kwh(s, t) - sum_s renewable_available_kwh(s, t))

It is the non-renewable energy this run's demand needs even if every site's renewable power could
feed any site's load at no cost (free, instant migrations). Since a sum of positive parts is at
least the positive part of the sum, every run's ``grid_kwh`` is at or above its own bound.
Applied to static's demand it bounds what *placement alone* can save against static:
``attainable_reduction = 1 - bound(static) / non_renewable(static)``. A policy that also shifts
work in time (waiting for renewables) changes the demand itself and is not bounded by it.
"""

from __future__ import annotations

import pandas as pd


def pooled_bound_kwh(ts: pd.DataFrame) -> float:
    """The pooled-renewables bound of one run's time series (kWh); 0 for an empty series."""
    if not len(ts):
        return 0.0
    per_step = ts.groupby("t_s")[["demand_kwh", "renewable_available_kwh"]].sum()
    return float((per_step["demand_kwh"] - per_step["renewable_available_kwh"]).clip(lower=0.0).sum())


def attainable_reduction(static_grid_kwh: float, static_bound_kwh: float) -> float | None:
    """The largest fractional cut of static's non-renewable energy placement alone can make."""
    if not static_grid_kwh > 0:
        return None
    return 1.0 - static_bound_kwh / static_grid_kwh
