"""The netns substrate: sites are network namespaces built with pyroute2, joined by shaped veth
WAN links. Clock, link replay and migrations are the emulated base's
(:mod:`testbed.substrate.emulated.base`); this module only says how the fabric is built."""

from __future__ import annotations

from testbed.netem.fabric import Fabric
from testbed.netem.plan import FabricPlan
from testbed.substrate.emulated.base import EmulatedSubstrate


class NetnsSubstrate(EmulatedSubstrate):
    """Sites as named network namespaces built with pyroute2 (the default for emulation)."""

    name = "netns"

    def make_fabric(self, plan: FabricPlan) -> Fabric:
        return Fabric(plan)
