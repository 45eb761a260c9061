"""Site-selection policies of the PowerTrip study, one per file. ``make_selection_policies`` turns a
scenario's policy entries into instances (a ``static_k`` with a list of k becomes one per k)."""

from __future__ import annotations

from testbed.federated.policies.base import Selection, SelectionPolicy
from testbed.federated.policies.centralized import CentralizedPolicy
from testbed.federated.policies.fixed_radius import FixedRadiusPolicy
from testbed.federated.policies.powertrip import PowerTripPolicy
from testbed.federated.policies.random import RandomPolicy
from testbed.federated.policies.static_k import StaticKPolicy
from testbed.spec.policies import policy_label


def make_selection_policies(spec, aggregator: str) -> list[SelectionPolicy]:
    label = policy_label(spec)
    if spec.name == "random":
        return [RandomPolicy(label, spec)]
    if spec.name == "static_k":
        if isinstance(spec.k, list):
            return [StaticKPolicy(f"{label}-k{k}", spec, k) for k in spec.k]
        return [StaticKPolicy(label, spec, spec.k)]
    if spec.name == "fixed_radius":
        return [FixedRadiusPolicy(label, spec)]
    if spec.name == "centralized":
        return [CentralizedPolicy(label, spec, aggregator)]
    if spec.name == "powertrip":
        return [PowerTripPolicy(label, spec)]
    raise ValueError(f"unknown selection policy {spec.name!r}")  # pragma: no cover (the spec rejects it)


__all__ = ["Selection", "SelectionPolicy", "make_selection_policies"]
