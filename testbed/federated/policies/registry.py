"""Registering a site-selection policy from its own file (a plug-in):

    @register_selection_policy(MySpec)      # MySpec: a SelectionPolicyBase with name: Literal["mine"]
    class MyPolicy(SelectionPolicy): ...    # built by MyPolicy.from_spec(label, spec, aggregator)

adds one entry, the model and the class together, to the one registry of selection policies
(:data:`testbed.spec.federated.SELECTION_POLICIES`), whose models join the scenario's policy union.
The built-in policies' entries are declared beside their models in :mod:`testbed.spec.federated`,
naming their class in this package by ``"module:Class"``.
"""

from __future__ import annotations

from collections.abc import Callable

from testbed.federated.policies.base import SelectionPolicy
from testbed.spec.federated import SELECTION_POLICIES


def register_selection_policy(model: type) -> Callable[[type[SelectionPolicy]], type[SelectionPolicy]]:
    """Class decorator: the decorated ``SelectionPolicy`` subclass runs the entries named by ``model``."""
    register = SELECTION_POLICIES.implements(model)

    def deco(cls: type[SelectionPolicy]) -> type[SelectionPolicy]:
        if not (isinstance(cls, type) and issubclass(cls, SelectionPolicy)):
            raise TypeError(f"@register_selection_policy({model.__name__}) decorates a SelectionPolicy subclass")
        return register(cls)

    return deco


__all__ = ["SELECTION_POLICIES", "register_selection_policy"]
