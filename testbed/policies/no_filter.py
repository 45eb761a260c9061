"""feasibility_aware with the Eq. 1 / Eq. 2 filter off: every move it makes is one Eq. 1 did
not get to veto, so the recorded outcomes test Eq. 1 independently (the review's objection 3)."""

from __future__ import annotations

from testbed.policies.feasibility_aware import FeasibilityAwarePolicy
from testbed.policies.registry import register_policy
from testbed.spec.policies import NoFilter


@register_policy(NoFilter)
class NoFilterPolicy(FeasibilityAwarePolicy):
    name = "no_filter"
    use_filter = False
