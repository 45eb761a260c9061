"""Placement only: place each arriving job as the migrating policies do, then never migrate.

Beside ``static`` (jobs start at their origin) and ``feasibility_aware`` (the same placement, then
migrations), it splits what a migrating policy gains into the part its placement earns and the part
its migrations earn: ``placement_only`` vs ``static`` is placement alone, ``feasibility_aware`` vs
``placement_only`` is migration alone.

The migrating policies do not all place alike: ``energy_only`` takes the free site with the largest
renewable surplus (:func:`~testbed.policies.placement.greenest`), while ``feasibility_aware`` (and
``no_filter`` and ``feasibility_classes``, which inherit it; ``carbon_aware`` starts from it) takes the
free powered site with the highest R(d), then the longest forecast window. This policy follows
``feasibility_aware``: it calls the very function that policy places with,
:func:`~testbed.policies.placement.most_renewable_share`.

Its registry entry (the scenario model, naming this class): :class:`testbed.spec.policies.PlacementOnly`.
"""

from __future__ import annotations

from testbed.controller.policy_api import Policy
from testbed.policies.placement import most_renewable_share


class PlacementOnlyPolicy(Policy):
    name = "placement_only"

    def place(self, job, view):
        site, why = most_renewable_share(job, view)
        return site, self.record(view, "place", job.id, None, site, why)

    def decide(self, view):
        return [], []
