"""``random``: ``k`` usable sites drawn uniformly each round (seeded by the scenario).

Its registry entry (the scenario model, naming this class): :class:`testbed.spec.federated.RandomK`.
"""

from __future__ import annotations

from testbed.federated.policies.base import Selection, SelectionPolicy
from testbed.federated.view import RoundView


class RandomPolicy(SelectionPolicy):
    def select(self, view: RoundView) -> Selection:
        usable = [s.name for s in view.usable]
        k = min(self.spec.k, len(usable))
        picks = view.rng.choice(len(usable), size=k, replace=False) if k else []
        return Selection(sorted((usable[i] for i in picks), key=list(view.sites).index), note=f"{k} drawn at random")
