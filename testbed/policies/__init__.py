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
        return StaticPolicy(label, scenario)
    if spec.name == "energy_only":
        return EnergyOnlyPolicy(label, scenario)
    if spec.name == "feasibility_aware":
        return FeasibilityAwarePolicy(label, scenario, spec)
    if spec.name == "no_filter":
        return NoFilterPolicy(label, scenario, spec)
    raise ValueError(f"unknown policy {spec.name!r}")  # pragma: no cover (the spec rejects it first)


__all__ = ["Move", "Policy", "make_policy"]
