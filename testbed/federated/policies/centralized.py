"""``centralized``: one power-constrained site trains on all the data; no model exchange.

The site (default: the aggregator; ``nodes`` can give it a larger datacenter's hardware) runs at the
effective capacity its power trace allows; each round is one pass over the whole training set (one
epoch-equivalent of work), so it is evaluated after every epoch, not charged whole multi-epoch rounds.

Its registry entry (the scenario model, naming this class): :class:`testbed.spec.federated.Centralized`.
"""

from __future__ import annotations

from testbed.federated.policies.base import Selection, SelectionPolicy
from testbed.federated.view import RoundView


class CentralizedPolicy(SelectionPolicy):
    def __init__(self, label: str, spec, default_site: str) -> None:
        super().__init__(label, spec)
        self.site = spec.site or default_site
        self.nodes = spec.nodes  # None: the site's own hardware
        self.lr = spec.lr  # None: federated.training.lr

    @classmethod
    def from_spec(cls, label: str, spec, aggregator: str) -> list[SelectionPolicy]:
        return [cls(label, spec, aggregator)]

    def select(self, view: RoundView) -> Selection:
        return Selection([], centralized=self.site, note=f"all data at {self.site}")
