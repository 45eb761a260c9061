"""feasibility_aware with the Eq. 1 / Eq. 2 filter off: every move it makes is one Eq. 1 did
not get to veto, so the recorded outcomes test Eq. 1 independently (the review's objection 3).

Its registry entry (the scenario model, naming this class): :class:`testbed.spec.policies.NoFilter`.
"""

from __future__ import annotations

from testbed.policies.feasibility_aware import FeasibilityAwarePolicy


class NoFilterPolicy(FeasibilityAwarePolicy):
    name = "no_filter"
    use_filter = False
