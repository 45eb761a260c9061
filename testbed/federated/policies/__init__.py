"""Site-selection policies of the PowerTrip study, one class per file. Each is an entry of the one
registry of selection policies (:data:`testbed.spec.federated.SELECTION_POLICIES`): a built-in's is
declared beside its model in the spec and names its class here by ``"module:Class"``; a plug-in's
file registers both with ``@register_selection_policy``. ``make_selection_policies`` turns a
scenario's policy entries into instances (a ``static_k`` with a list of k becomes one per k)."""

from __future__ import annotations

from testbed.federated.policies.base import Selection, SelectionPolicy
from testbed.federated.policies.registry import SELECTION_POLICIES, register_selection_policy
from testbed.spec.policies import policy_label


def make_selection_policies(spec, aggregator: str) -> list[SelectionPolicy]:
    cls = SELECTION_POLICIES.builder(spec.name)
    if not (isinstance(cls, type) and issubclass(cls, SelectionPolicy)):
        raise TypeError(f"selection policy {spec.name!r}: its builder {cls!r} is not a SelectionPolicy subclass")
    return cls.from_spec(policy_label(spec), spec, aggregator)


__all__ = ["SELECTION_POLICIES", "Selection", "SelectionPolicy", "make_selection_policies", "register_selection_policy"]
