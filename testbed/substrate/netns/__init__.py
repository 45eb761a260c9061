"""The netns substrate: sites are network namespaces, links are shaped veth pairs, bytes are real."""

from __future__ import annotations

from testbed.substrate.registry import SubstrateKind, register_substrate


def _make(inputs, run_id):
    from testbed.substrate.netns.substrate import NetnsSubstrate

    return NetnsSubstrate(inputs, run_id=run_id)


def _unavailable(scenario):
    from testbed.substrate.emulated.preflight import live_unavailable

    return live_unavailable(scenario)


# side by side: a run's namespaces, interfaces, cgroups and temp folders are named by its run id; its
# addresses, routes, ports, sysctls and qdiscs lie inside its own namespaces (nothing in the root
# namespace: Fabric._root_interfaces), so two runs can use the same 10.200/10.201/10.202 addresses
register_substrate(SubstrateKind("netns", "namespaces + tc, root", make=_make, live=True, unavailable=_unavailable,
                                 side_by_side=True))
