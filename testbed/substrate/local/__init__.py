"""The local substrate: one site whose node agent runs as a plain process on this host (no network
namespace, no WAN link). For what happens *on* a node where namespaces cannot be made: a real GPU
capped from a trace through ``power.backend: nvml`` (scripts/gpu-check.sh). Migrations need links:
use netns for more than one site."""

from __future__ import annotations

from testbed.substrate.registry import SubstrateKind, register_substrate


def _make(inputs, run_id):
    from testbed.substrate.local.substrate import LocalSubstrate

    return LocalSubstrate(inputs, run_id=run_id)


def _unavailable(scenario):
    from testbed.substrate.local.substrate import local_unavailable

    return local_unavailable(scenario)


register_substrate(SubstrateKind("local", "one site, its node agent a local process: no namespaces, no links",
                                 make=_make, live=True, unavailable=_unavailable, runtimes=("process",),
                                 one_at_a_time="its node agent listens on fixed ports of this host's loopback"))
