"""The contract of a site-selection policy: ``select(view) -> Selection`` once per round, and
``observe(...)`` after the round with what really happened (for policies that learn)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from testbed.federated.view import RoundView


@dataclass(frozen=True)
class Selection:
    sites: list[str]                      # participants that train this round (empty: wait a trace step)
    centralized: str | None = None        # one site trains on all the data (the centralized baseline)
    projected_gain: float | None = None   # the policy's projection for this round, if it makes one
    formula_gain: float | None = None     # the uncorrected formula's projection, where a policy corrects it
    candidates: list[dict] = field(default_factory=list)  # what it weighed (k, gain, tau_s, eta)
    note: str = ""

    @property
    def k(self) -> int:
        return 1 if self.centralized else len(self.sites)


class SelectionPolicy(ABC):
    def __init__(self, label: str, spec) -> None:
        self.label = label
        self.spec = spec

    @classmethod
    def from_spec(cls, label: str, spec, aggregator: str) -> list["SelectionPolicy"]:
        """The policies one scenario entry runs (one by default; ``static_k`` with a list of k, one per k)."""
        return [cls(label, spec)]

    @abstractmethod
    def select(self, view: RoundView) -> Selection: ...

    def observe(self, view: RoundView, selection: Selection, acc_before: float, acc_after: float) -> None:
        """Called after the round; the default policy learns nothing."""
