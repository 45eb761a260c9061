"""Effective capacity of a site under its power budget: min(hardware, power), through the power path.

A site has ``nodes`` nodes of one type. With a budget of ``B`` kW (its available power from the
trace plus the grid top-up), it may run ``m <= nodes`` of them; :func:`testbed.power.budget.plan_site`
gives the per-node GPU cap that fits ``B / m`` and :class:`~testbed.power.node_model.NodePower` the
speed at that cap. Nodes not running are off. The site runs the ``m`` that maximises

    C(m) = m x speed(cap_m)        (reference nodes: 1.0 = one uncapped reference GPU)

among the ``m`` whose cap is at least the GPU's lowest cap (a node cannot run below it). No such
``m``: the site cannot train this round (capacity 0). With an unlimited budget the site runs every
node uncapped, so C = nodes x node speed: the hardware bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from testbed.power.budget import plan_site
from testbed.power.node_model import NodePower


@dataclass(frozen=True)
class SiteCapacity:
    n_active: int        # nodes that train
    cap_w: float         # GPU cap of each active node (0 when none)
    capacity: float      # sum of the active nodes' speeds, reference nodes
    power_kw: float      # wall power the active nodes draw
    budget_kw: float     # what the site could draw

    @property
    def usable(self) -> bool:
        return self.capacity > 0


def site_capacity(site: str, node: NodePower, nodes: int, *, available_kw: float, grid_topup_kw: float | None,
                  p_sys_kw: float = 1.8) -> SiteCapacity:
    best = SiteCapacity(0, 0.0, 0.0, 0.0, math.inf if grid_topup_kw is None else available_kw + grid_topup_kw)
    for m in range(1, nodes + 1):
        plan = plan_site(site, node, renewable_kw=available_kw, grid_topup_kw=grid_topup_kw, n_running=m,
                         n_idle=0, n_transfer_ends=0, p_sys_kw=p_sys_kw)
        if plan.n_waiting > 0 or plan.cap_requested_w < node.min_cap_w:
            break  # below the lowest cap (the plan would hold jobs); more nodes only shrink each share further
        cap = plan.cap_w
        c = m * node.speed(cap)
        if c > best.capacity + 1e-12:
            best = SiteCapacity(m, cap, c, m * node.active_kw(cap), best.budget_kw)
    return best
