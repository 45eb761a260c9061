"""Same clock, transfers and link replay as the netns substrate; the fabric is built by Mininet."""

from __future__ import annotations

from testbed.substrate.mininet.fabric import MininetFabric
from testbed.substrate.netns.substrate import EmulatedSubstrate


class MininetSubstrate(EmulatedSubstrate):
    name = "mininet"

    def make_fabric(self, plan):
        return MininetFabric(plan)
