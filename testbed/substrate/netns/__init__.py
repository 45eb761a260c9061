"""The netns substrate: sites are network namespaces, links are shaped veth pairs, bytes are real."""

from __future__ import annotations

from testbed.substrate.registry import SubstrateKind, register_substrate


def _make(inputs, run_id):
    from testbed.substrate.netns.substrate import NetnsSubstrate

    return NetnsSubstrate(inputs, run_id=run_id)


def _unavailable(scenario):
    from testbed.substrate.emulated.preflight import live_unavailable

    return live_unavailable(scenario)


def _doctor(caps):
    from testbed.doctor.report import latency, network_needs, shaping

    return network_needs(caps), f"bandwidth: {shaping(caps)}; latency/jitter/loss: {latency(caps) or 'none'}"


def _auto_refusal(scenario):
    """Why ``--substrate auto`` must not choose netns here: not root, no namespaces, or a module the
    scenario's nodes need (torch for agents) missing."""
    import importlib.util
    import os

    from testbed.node_kinds import NODE_KINDS

    if os.geteuid() != 0:
        return "not root: network namespaces need root, so the analytic substrate ran"
    from testbed.doctor import probe

    if not probe("netns").available:
        return "network namespaces are not available here (see `testbed doctor`)"
    kind = NODE_KINDS.get(scenario.emulation.nodes)
    missing = [m for m in kind.requires_modules if importlib.util.find_spec(m) is None]
    if missing:
        return f"the scenario's nodes ({kind.name}) need {', '.join(missing)}, which is not installed"
    return None


# side by side: a run's namespaces, interfaces, cgroups and temp folders are named by its run id; its
# addresses, routes, ports, sysctls and qdiscs lie inside its own namespaces (nothing in the root
# namespace: Fabric._root_interfaces), so two runs can use the same 10.200/10.201/10.202 addresses
# the federated study's real exchanges (a string: federated sits above the substrates in the import order)
register_substrate(SubstrateKind(
    "netns", "namespaces + tc, root", make=_make, live=True, unavailable=_unavailable, side_by_side=True,
    doctor=_doctor, federated="testbed.federated.netns_exchange:NetnsExchange",
    auto_rank=10, auto_refusal=_auto_refusal,
    auto_reason="root and network namespaces available: sites are namespaces, links are shaped, bytes are real"))
