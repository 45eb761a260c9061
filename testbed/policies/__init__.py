"""Policies, one per file. ``make_policy`` turns a scenario's policy entry into an instance."""

from __future__ import annotations

from testbed.policies.base import Move, Policy
from testbed.policies.energy_only import EnergyOnlyPolicy
from testbed.policies.feasibility_aware import FeasibilityAwarePolicy
from testbed.policies.no_filter import NoFilterPolicy
from testbed.policies.static import StaticPolicy
from testbed.spec.policies import policy_label
from testbed.spec.scenario import Scenario


def make_policy(spec, scenario: Scenario) -> Policy:
    label = policy_label(spec)
    if spec.name == "static":
        policy: Policy = StaticPolicy(label, scenario)
    elif spec.name == "energy_only":
        policy = EnergyOnlyPolicy(label, scenario)
    elif spec.name == "feasibility_aware":
        policy = FeasibilityAwarePolicy(label, scenario, spec)
    elif spec.name == "no_filter":
        policy = NoFilterPolicy(label, scenario, spec)
    else:  # pragma: no cover (the spec rejects it first)
        raise ValueError(f"unknown policy {spec.name!r}")
    policy.topup_kw = spec.grid_topup_kw
    return policy


__all__ = ["Move", "Policy", "make_policy"]
