"""Site-selection policies of the PowerTrip study, one per file, each registered by its own
``@register_selection_policy``. ``make_selection_policies`` turns a scenario's policy entries into
instances (a ``static_k`` with a list of k becomes one per k)."""

from __future__ import annotations

from testbed.errors import SpecError
from testbed.federated.policies.base import Selection, SelectionPolicy
from testbed.federated.policies.registry import SELECTION_POLICIES, register_selection_policy
from testbed.registry import UnknownNameError
from testbed.spec.policies import policy_label

# the built-in policies: importing a file registers it
from testbed.federated.policies import centralized, fixed_radius, powertrip, random, static_k  # noqa: F401  isort: skip


def make_selection_policies(spec, aggregator: str) -> list[SelectionPolicy]:
    try:
        cls = SELECTION_POLICIES.get(spec.name)
    except UnknownNameError as e:  # a spec model registered without an implementation
        raise SpecError([("policies", f"{e}: no implementation is registered for it")]) from None
    return cls.from_spec(policy_label(spec), spec, aggregator)


__all__ = ["SELECTION_POLICIES", "Selection", "SelectionPolicy", "make_selection_policies", "register_selection_policy"]
