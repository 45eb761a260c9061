"""The emulated base's clock, link replay and movers (:mod:`testbed.substrate.emulated.base`);
the fabric is built by Mininet."""

from __future__ import annotations

from testbed.netem.plan import FabricPlan
from testbed.substrate.emulated.base import EmulatedSubstrate
from testbed.substrate.mininet.fabric import MininetFabric
from testbed.substrate.mininet.switches import substrate_switch


class MininetSubstrate(EmulatedSubstrate):
    name = "mininet"

    def make_fabric(self, plan: FabricPlan) -> MininetFabric:
        return MininetFabric(plan, switch=substrate_switch(self._in.scenario))
