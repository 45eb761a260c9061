"""``fixed_radius``: every usable site within ``radius_miles`` of the aggregator (default 1000).

Its registry entry (the scenario model, naming this class): :class:`testbed.spec.federated.FixedRadius`.
"""

from __future__ import annotations

from testbed.federated.policies.base import Selection, SelectionPolicy
from testbed.federated.view import RoundView


class FixedRadiusPolicy(SelectionPolicy):
    def select(self, view: RoundView) -> Selection:
        r = self.spec.radius_miles
        near = [s.name for s in view.usable if s.distance_miles <= r]
        return Selection(near, note=f"{len(near)} usable within {r:g} miles")
