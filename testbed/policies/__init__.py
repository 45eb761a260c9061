"""Policies, one per file, each registered by its own ``@register_policy``. ``make_policy`` turns a
scenario's policy entry into an instance."""

from __future__ import annotations

from testbed.errors import SpecError
from testbed.controller.policy_api import Move, Policy
from testbed.spec.plugins import PolicyParams
from testbed.policies.registry import POLICIES, PolicyEntry, register_policy
from testbed.registry import UnknownNameError
from testbed.spec.policies import policy_label
from testbed.spec.scenario import Scenario

# the built-in policies: importing a file registers it
from testbed.policies import energy_only, feasibility_aware, feasibility_classes, no_filter, static  # noqa: E402,F401  isort: skip
from testbed.policies import carbon_aware  # noqa: E402,F401  isort: skip
from testbed.policies import feasibility_aware_paper, placement_only  # noqa: E402,F401  isort: skip


def make_policy(spec, scenario: Scenario) -> Policy:
    try:
        entry = POLICIES.get(spec.name)
    except UnknownNameError as e:  # a spec model registered without an implementation
        raise SpecError([("policies", f"{e}: no implementation is registered for it")]) from None
    label = policy_label(spec)
    policy: Policy = entry.build(label, scenario, spec) if entry.spec_arg else entry.build(label, scenario)
    policy.topup_kw = getattr(spec, "grid_topup_kw", None)
    return policy


__all__ = ["POLICIES", "Move", "Policy", "PolicyEntry", "PolicyParams", "make_policy", "register_policy"]
