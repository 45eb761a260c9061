"""An example site-selection policy (federated, PowerTrip study), plugged in by class:

    policies:
      - class: "examples/policies/nearest_powered.py:NearestPowered"
        k: 3
        min_kw: 0.5

Each round it trains on the ``k`` usable sites nearest the aggregator (by one-way latency) whose
available power is at least ``min_kw``, and reports the round time its round-time model predicts
for them as what it weighed. It learns nothing from ``observe``.
"""

from __future__ import annotations

from pydantic import Field

from testbed.federated.policies import Selection, SelectionPolicy
from testbed.federated.view import RoundView
from testbed.policies import PolicyParams


class NearestPowered(SelectionPolicy):
    name = "nearest_powered"

    class Params(PolicyParams):
        k: int = Field(2, ge=1, le=1000, description="Sites per round, at most.")
        min_kw: float = Field(0.0, ge=0, description="Least available power a site needs to be chosen, kW.")

    def select(self, view: RoundView) -> Selection:
        ok = [s for s in view.usable if s.available_kw >= self.spec.min_kw]
        ok.sort(key=lambda s: (s.latency_ms, list(view.sites).index(s.name)))
        picks = [s.name for s in ok[: self.spec.k]]
        if not picks:
            return Selection([], note=f"no usable site with >= {self.spec.min_kw:g} kW")
        cands = [{"k": len(picks), "tau_s": view.round_s(picks)}]
        return Selection(picks, candidates=cands, note=f"{len(picks)} nearest with >= {self.spec.min_kw:g} kW")
