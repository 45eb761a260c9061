"""One node's power and speed as functions of its GPU cap: a node type plus a power profile.

The node type gives the wall power of an *uncapped* training node (``p_active_kw``, the migration
paper's P_node) and of an idle one; the profile gives how the GPU's draw and throughput fall as its cap
falls. The rest of the node (host CPU, memory, fans, PSU losses) is constant while training:

    host_kw        = p_active_kw - profile.max_draw_w / 1000
    active_kw(cap) = host_kw + profile.draw_w(cap) / 1000
    speed(cap)     = node_type.speed * profile.throughput_frac(cap)

A node type without a profile gets the linear model over its dynamic range
(``p_active_kw - p_idle_kw``): throughput proportional to the power above idle.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol

from testbed.power.gpu.profile import PowerProfile, load_profile


class NodeType(Protocol):
    """What the power model reads of a node type (``testbed.spec.topology.NodeType`` is one; the
    power layer sits below the spec, so it names the fields, not the class)."""

    p_active_kw: float
    p_idle_kw: float
    speed: float
    power_profile: str | None


@lru_cache(maxsize=64)
def _profile(name_or_path: str) -> PowerProfile:
    return load_profile(name_or_path)


@dataclass(frozen=True)
class NodePower:
    node_type: NodeType
    profile: PowerProfile

    @classmethod
    def of(cls, node_type: NodeType, name: str = "node") -> "NodePower":
        if node_type.power_profile:
            prof = _profile(node_type.power_profile)
        else:
            prof = PowerProfile.linear(f"linear:{name}", (node_type.p_active_kw - node_type.p_idle_kw) * 1000.0)
        return cls(node_type, prof)

    @property
    def host_kw(self) -> float:
        return self.node_type.p_active_kw - self.profile.max_draw_w / 1000.0

    @property
    def min_cap_w(self) -> float:
        return self.profile.min_w

    @property
    def max_cap_w(self) -> float:
        return self.profile.max_w

    def clamp_w(self, cap_w: float) -> float:
        return self.profile.clamp_w(cap_w)

    def active_kw(self, cap_w: float) -> float:
        """Wall power of the node training under ``cap_w``."""
        return self.host_kw + self.profile.draw_w(cap_w) / 1000.0

    def speed(self, cap_w: float) -> float:
        """GPU-hours of work per hour under ``cap_w``."""
        return self.node_type.speed * self.profile.throughput_frac(cap_w)

    def throughput_frac(self, cap_w: float) -> float:
        return self.profile.throughput_frac(cap_w)

    def cap_for_budget_kw(self, budget_kw: float) -> float:
        """The GPU cap a node would need to stay within ``budget_kw`` of wall power.

        Within the profile's range this is the highest cap whose draw fits. Below the lowest
        draw the request is the GPU's share of the budget itself (draw ~ cap at the bottom of a
        curve), possibly under ``min_cap_w`` or 0: the *requested* cap, before a driver clamps it.
        """
        gpu_w = (budget_kw - self.host_kw) * 1000.0
        if gpu_w >= self.profile.max_draw_w:
            return self.profile.max_w
        if gpu_w < self.profile.min_draw_w:
            return max(0.0, gpu_w)
        return self.profile.cap_for_draw_w(gpu_w)
