"""The site-selection policies a federated scenario can name, by name: each registers itself in its
own file.

    @register_selection_policy(MySpec)      # MySpec: a SelectionPolicyBase with name: Literal["mine"]
    class MyPolicy(SelectionPolicy): ...    # built by MyPolicy.from_spec(label, spec, aggregator)

``register_selection_policy`` also adds the spec model to the scenario's policy union (if its file
did not already), so a plug-in selection policy is one file.
"""

from __future__ import annotations

from collections.abc import Callable

from testbed.federated.policies.base import SelectionPolicy
from testbed.registry import Registry
from testbed.spec.federated import selection_policy
from testbed.spec.plugins import adopt_plugins, note_registered
from testbed.spec.union import check_member

SELECTION_POLICIES: Registry[type[SelectionPolicy]] = Registry("selection policy")


def register_selection_policy(model: type) -> Callable[[type[SelectionPolicy]], type[SelectionPolicy]]:
    """Class decorator: the decorated ``SelectionPolicy`` subclass runs the entries named by ``model``."""
    selection_policy(model)  # a no-op when the spec module registered it already
    name = check_member(model, "name")

    def deco(cls: type[SelectionPolicy]) -> type[SelectionPolicy]:
        if not (isinstance(cls, type) and issubclass(cls, SelectionPolicy)):
            raise TypeError(f"@register_selection_policy({model.__name__}) decorates a SelectionPolicy subclass")
        SELECTION_POLICIES.add(name, cls)
        note_registered(cls, name)
        return cls

    return deco


adopt_plugins("federated", SELECTION_POLICIES, register_selection_policy)  # classes the scenario loader resolves by import path
