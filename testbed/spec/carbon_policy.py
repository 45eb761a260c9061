"""The carbon-aware migration policy's scenario entry (its code: ``testbed.policies.carbon_aware``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from testbed.spec.policies import FeasibilityAware, migration_policy


@migration_policy("testbed.policies.carbon_aware:CarbonAwarePolicy")
class CarbonAware(FeasibilityAware):
    """feasibility_aware plus the grid's carbon intensity and price (``traces.carbon``, optionally ``traces.price``)."""

    name: Literal["carbon_aware"] = Field(description="carbon_aware: feasibility_aware, and jobs left on grid power move to a lower-carbon grid when the CO2 saved pays for the move.")  # type: ignore[assignment]
    lookahead_h: float = Field(6.0, gt=0, le=72, description="Hours of carbon intensity a move is judged over (at most the job's remaining run time).")
    min_carbon_reduction_frac: float = Field(
        0.2, ge=0, lt=1, description="A grid-to-grid move needs the destination's mean intensity this fraction below the source's.")
    carbon_margin: float = Field(0.0, ge=0, description="The CO2 a grid-to-grid move saves must exceed (1 + carbon_margin) x the CO2 its transfer emits.")
    max_price_per_kwh: float | None = Field(
        None, description="With traces.price: no grid top-up at a site while its price is above this (renewables and battery only); None = ignore prices.")
