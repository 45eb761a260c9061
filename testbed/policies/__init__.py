"""Migration policies, one class per file. Each is an entry of the one registry of migration
policies (:data:`testbed.spec.policies.MIGRATION_POLICIES`): a built-in's is declared beside its
model in the spec and names its class here by ``"module:Class"``; a plug-in's file registers both
with ``@register_policy``. ``make_policy`` turns a scenario's policy entry into an instance."""

from __future__ import annotations

from testbed.controller.policy_api import Move, Policy
from testbed.spec.plugins import PolicyParams
from testbed.policies.registry import MIGRATION_POLICIES, PolicyKind, register_policy
from testbed.spec.policies import policy_label
from testbed.spec.scenario import Scenario


def make_policy(spec, scenario: Scenario) -> Policy:
    entry = MIGRATION_POLICIES.get(spec.name)
    build = entry.builder()
    label = policy_label(spec)
    policy: Policy = build(label, scenario, spec) if entry.spec_arg else build(label, scenario)
    policy.topup_kw = getattr(spec, "grid_topup_kw", None)
    return policy


__all__ = ["MIGRATION_POLICIES", "Move", "Policy", "PolicyKind", "PolicyParams", "make_policy", "register_policy"]
