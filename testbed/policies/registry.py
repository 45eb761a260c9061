"""The migration policies a scenario can name, by name: each registers itself in its own file.

    @register_policy(MySpec)                 # MySpec: a MigrationPolicyBase with name: Literal["mine"]
    class MyPolicy(Policy): ...              # built as MyPolicy(label, scenario, spec)

``register_policy`` also adds the spec model to the scenario's policy union (if its file did not
already), so a plug-in policy is one file: importing it is all it takes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from testbed.registry import Registry
from testbed.spec.plugins import adopt_plugins, note_registered
from testbed.spec.policies import migration_policy
from testbed.spec.union import check_member


@dataclass(frozen=True)
class PolicyEntry:
    model: type                  # the spec model (pydantic, ``name: Literal[...]``)
    build: Callable[..., Any]    # (label, scenario, spec) -> Policy, or (label, scenario) without spec_arg
    spec_arg: bool = True        # whether ``build`` takes the scenario's policy entry


POLICIES: Registry[PolicyEntry] = Registry("migration policy")


def register_policy(model: type, *, spec_arg: bool = True) -> Callable[[Any], Any]:
    """Class (or function) decorator: the decorated callable builds the policy named by ``model``
    (its ``name`` Literal). The model joins the scenario's union here if its file did not add it."""
    migration_policy(model)  # a no-op when the spec module registered it already
    name = check_member(model, "name")

    def deco(build: Any) -> Any:
        POLICIES.add(name, PolicyEntry(model, build, spec_arg))
        note_registered(build, name)
        return build

    return deco


adopt_plugins("migration", POLICIES, register_policy)  # classes the scenario loader resolves by import path
