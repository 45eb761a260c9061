"""``static_k``: always ``k`` sites, the top ``k`` by the power-to-cost score each round.

Only the *number* of sites is fixed; which sites follow the same ranking as ``powertrip``, so the
comparison isolates PowerTrip's dynamic choice of k. A list of k in the scenario runs one policy per
k, and the results report the best one post hoc (what the paper calls the static optimum).

Its registry entry (the scenario model, naming this class): :class:`testbed.spec.federated.StaticK`.
"""

from __future__ import annotations

from testbed.federated.policies.base import Selection, SelectionPolicy
from testbed.federated.score import ranked
from testbed.federated.view import RoundView


class StaticKPolicy(SelectionPolicy):
    def __init__(self, label: str, spec, k: int) -> None:
        super().__init__(label, spec)
        self.k = k

    @classmethod
    def from_spec(cls, label: str, spec, aggregator: str) -> list[SelectionPolicy]:
        if isinstance(spec.k, list):
            return [cls(f"{label}-k{k}", spec, k) for k in spec.k]
        return [cls(label, spec, spec.k)]

    def select(self, view: RoundView) -> Selection:
        top = ranked(view)[: self.k]
        return Selection(top, note=f"top {len(top)} of {self.k} by power-to-cost")
