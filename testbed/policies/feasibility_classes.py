"""feasibility_aware with the paper's fixed transfer-time classes as its time rule instead of Eq. 1.

The paper's Algorithm 1 (seed 2511.16182): class A (``T_transfer < 60 s``) always passes,
class C (``>= 300 s``) never does, and class B passes if Eq. 1 holds (``class_b: eq1``, the
paper's) or always (``class_b: always``: the cut-offs alone). Eq. 2, the ranking and the damping
are feasibility_aware's, so running it beside ``feasibility_aware`` asks one question: do the
gains change if migrations are filtered by the fixed classes instead of Eq. 1?

Its registry entry (the scenario model, naming this class): :class:`testbed.spec.policies.FeasibilityClasses`.
"""

from __future__ import annotations

from testbed.feasibility import Prediction
from testbed.policies.feasibility_aware import FeasibilityAwarePolicy


class FeasibilityClassesPolicy(FeasibilityAwarePolicy):
    name = "feasibility_classes"

    def time_ok(self, pred: Prediction) -> bool:
        if pred.paper_class == "A":
            return True
        if pred.paper_class == "B":
            return self.spec.class_b == "always" or pred.feasible
        return False
