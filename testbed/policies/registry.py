"""Registering a migration policy from its own file (a plug-in):

    @register_policy(MySpec)                 # MySpec: a MigrationPolicyBase with name: Literal["mine"]
    class MyPolicy(Policy): ...              # built as MyPolicy(label, scenario, spec)

adds one entry, the model and the class together, to the one registry of migration policies
(:data:`testbed.spec.policies.MIGRATION_POLICIES`), whose models make the scenario's policy union.
The built-in policies' entries are declared beside their models in :mod:`testbed.spec.policies`,
naming their class in this package by ``"module:Class"``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from testbed.spec.policies import MIGRATION_POLICIES, PolicyKind


def register_policy(model: type, *, spec_arg: bool = True) -> Callable[[Any], Any]:
    """Class (or function) decorator: the decorated callable builds the policy named by ``model``
    (its ``name`` Literal): ``build(label, scenario, spec)``, or ``build(label, scenario)`` with
    ``spec_arg=False``."""
    return MIGRATION_POLICIES.implements(model, spec_arg=spec_arg)


__all__ = ["MIGRATION_POLICIES", "PolicyKind", "register_policy"]
