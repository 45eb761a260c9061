"""The netns substrate: sites are network namespaces, links are shaped veth pairs, bytes are real."""

from __future__ import annotations

from testbed.substrate.registry import SubstrateKind, register_substrate


def _make(inputs, run_id):
    from testbed.substrate.netns.substrate import NetnsSubstrate

    return NetnsSubstrate(inputs, run_id=run_id)


def _unavailable(scenario):
    from testbed.substrate.emulated.preflight import live_unavailable

    return live_unavailable(scenario)


register_substrate(SubstrateKind("netns", "namespaces + tc, root", make=_make, live=True, unavailable=_unavailable))
