"""Policy entries of a scenario. Each runs on identical traces; results go side by side."""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field, model_validator

from testbed.spec.federated import FL_POLICY_NAMES, Centralized, FixedRadius, PowerTrip, RandomK, StaticK
from testbed.spec.topology import Strict

Correction = Literal["protocol_efficiency", "slow_start"]


class FeasibilityModel(Strict):
    """Parameters of Eq. 1 / Eq. 2 (seed 2511.16182). Corrections are off by default."""

    alpha: float = Field(0.1, gt=0, le=1)
    t_load_s: float = Field(10.3, ge=0)
    t_downtime_s: float = Field(0.4, ge=0)
    robust_degradation_frac: float = Field(0.5, ge=0, lt=1, description="Class A = still feasible at this bandwidth loss.")
    corrections: list[Correction] = Field(default_factory=list)


class _Base(Strict):
    label: str | None = Field(None, pattern=r"^[A-Za-z0-9_.-]{1,64}$", description="Output name (default: name).")
    grid_topup_kw: float | None = Field(
        None, ge=0, description="Grid power per site this policy tops renewables up with, at most (kW); the site's "
        "grid limit still applies. None = whatever the grid limit allows. 0 = run on renewables alone (caps follow "
        "the trace).",
    )


class Static(_Base):
    name: Literal["static"]


class EnergyOnly(_Base):
    name: Literal["energy_only"]


class FeasibilityAware(_Base, FeasibilityModel):
    name: Literal["feasibility_aware"]
    epsilon: float | None = Field(None, gt=0, le=0.5, description="Risk budget in (0, 0.5]; None = deterministic Eq. 1.")
    assumed_window_noise_pct: float | None = Field(
        None, ge=0, description="Forecast spread the risk budget assumes (default: the scenario's window noise)."
    )
    assumed_bandwidth_noise_pct: float = Field(
        0.0, ge=0, le=200,
        description="With epsilon: bandwidth uncertainty the risk budget hedges (log-normal sigma, %); the budget "
        "is split between window and bandwidth by the union bound. 0 = the bandwidth forecast is trusted.",
    )
    gamma: float = Field(1.0, ge=0, description="Weight of renewable availability R(d).")
    beta: float = Field(0.5, ge=0, description="Weight of delay L(d), hours.")
    min_gain: float = Field(0.05, ge=0, description="Utility gain over staying that a move must exceed.")


    @model_validator(mode="after")
    def _bandwidth_noise_needs_epsilon(self):
        if self.assumed_bandwidth_noise_pct > 0 and self.epsilon is None:
            raise ValueError("assumed_bandwidth_noise_pct: needs a risk budget (set epsilon)")
        return self


class NoFilter(FeasibilityAware):
    """feasibility_aware with the Eq. 1 filter disabled: the independent test of Eq. 1."""

    name: Literal["no_filter"]  # type: ignore[assignment]


PolicySpec = Annotated[Union[Static, EnergyOnly, FeasibilityAware, NoFilter,
                             RandomK, StaticK, FixedRadius, Centralized, PowerTrip], Field(discriminator="name")]
MIGRATION_POLICY_NAMES = ("static", "energy_only", "feasibility_aware", "no_filter")
POLICY_NAMES = MIGRATION_POLICY_NAMES + FL_POLICY_NAMES  # the second group: federated scenarios (PowerTrip study)


def policy_label(p) -> str:
    return p.label or p.name
