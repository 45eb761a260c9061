"""``fixed_radius``: every usable site within ``radius_miles`` of the aggregator (default 1000)."""

from __future__ import annotations

from testbed.federated.policies.base import Selection, SelectionPolicy
from testbed.federated.policies.registry import register_selection_policy
from testbed.federated.view import RoundView
from testbed.spec.federated import FixedRadius


@register_selection_policy(FixedRadius)
class FixedRadiusPolicy(SelectionPolicy):
    def select(self, view: RoundView) -> Selection:
        r = self.spec.radius_miles
        near = [s.name for s in view.usable if s.distance_miles <= r]
        return Selection(near, note=f"{len(near)} usable within {r:g} miles")
