"""Static: jobs stay where they were placed (origin, or least loaded if it is full).

Its registry entry (the scenario model, naming this class): :class:`testbed.spec.policies.Static`.
"""

from __future__ import annotations

from testbed.controller.policy_api import Policy
from testbed.policies.placement import origin_or_least_loaded


class StaticPolicy(Policy):
    name = "static"

    def place(self, job, view):
        site, why = origin_or_least_loaded(job, view)
        return site, self.record(view, "place", job.id, None, site, why)

    def decide(self, view):
        return [], []
