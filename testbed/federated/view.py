"""What a selection policy sees at the start of a round (pure data; built by the controller)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from testbed.federated.roundtime import RoundTimeModel, SiteTime


@dataclass(frozen=True)
class SiteView:
    name: str
    n_samples: int
    distance_miles: float     # great-circle distance to the aggregator
    available_kw: float       # power trace at the round start (+ grid top-up)
    effective_kw: float       # what the site's active nodes draw: min(hardware, power budget)
    capacity: float           # effective capacity, reference nodes
    latency_ms: float         # one way, to the aggregator
    time: SiteTime            # predicted compute / down / up at the round start

    @property
    def usable(self) -> bool:
        return self.capacity > 0


@dataclass(frozen=True)
class PastRound:
    round: int
    k: int
    accuracy: float
    measured_gain: float


@dataclass(frozen=True)
class RoundView:
    round: int
    t_s: float
    accuracy: float                     # test accuracy of the current global model
    sites: dict[str, SiteView]          # participants, in scenario order
    aggregator: str
    update_gb: float
    model: RoundTimeModel               # the policy's round-time model
    history: list[PastRound] = field(default_factory=list)
    rng: np.random.Generator | None = None

    @property
    def usable(self) -> list[SiteView]:
        return [s for s in self.sites.values() if s.usable]

    def round_s(self, names: list[str]) -> float:
        return self.model.round_s([self.sites[n].time for n in names])
