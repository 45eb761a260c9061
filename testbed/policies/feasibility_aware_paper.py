"""feasibility_aware as the paper's Algorithm 1 (seed 2511.16182), undamped.

The code is :class:`~testbed.policies.feasibility_aware.FeasibilityAwarePolicy`'s, unchanged: the
filter (Eq. 1 or the risk budget, Eq. 2), the utility ranking, ``min_gain`` and placement. Only its
entry differs (:class:`~testbed.spec.policies.FeasibilityAwarePaper`): the damping of
:mod:`testbed.policies.damping` (the minimum dwell ``min_dwell_h`` and the ``return_margin``), on by
default in ``feasibility_aware``, is fixed at 0 here and cannot be set. So it runs exactly as
``{name: feasibility_aware, min_dwell_h: 0, return_margin: 0}``, under its own name.

Its registry entry (the scenario model, naming this class): :class:`testbed.spec.policies.FeasibilityAwarePaper`.
"""

from __future__ import annotations

from testbed.policies.feasibility_aware import FeasibilityAwarePolicy


class FeasibilityAwarePaperPolicy(FeasibilityAwarePolicy):
    name = "feasibility_aware_paper"
