"""Trace to cap: the power a site may draw at one trace step decides its nodes' GPU caps.

At each step a site's budget is the renewable power it really has (the trace: the backend gets
the truth) plus the grid top-up the policy chose (at most the site's grid limit; ``None`` =
unlimited). The budget feeds, in order: migrations in flight (``P_sys/2`` at each end, seed
Eq. 2), idle nodes (``p_idle_kw``), then the running nodes, which share what is left evenly —
each node's share becomes its cap through :meth:`NodePower.cap_for_budget_kw`.

A share too small for the GPU's lowest cap is still *requested* as such; the driver (or the
emulated backend) clamps it to ``min_cap_w``, and the energy the site then draws beyond its
budget is accounted as grid power over the limit (``overdraw_kwh``), never hidden.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from testbed.power.node_model import NodePower


@dataclass(frozen=True)
class SitePowerPlan:
    site: str
    renewable_kw: float           # true renewable power, mean over the step
    grid_topup_kw: float | None   # what the policy allows from the grid this step (None: unlimited)
    fixed_kw: float               # transfers + idle nodes, fed first
    n_running: int
    node_budget_kw: float         # per running node (inf when unlimited)
    cap_requested_w: float        # per running node, before clamping
    cap_w: float                  # per running node, clamped to the GPU's range

    @property
    def budget_kw(self) -> float:
        return math.inf if self.grid_topup_kw is None else self.renewable_kw + self.grid_topup_kw


def plan_site(site: str, node: NodePower, *, renewable_kw: float, grid_topup_kw: float | None, n_running: int,
              n_idle: int, n_transfer_ends: int, p_sys_kw: float) -> SitePowerPlan:
    fixed_kw = n_idle * node.node_type.p_idle_kw + n_transfer_ends * p_sys_kw / 2.0
    if grid_topup_kw is None or n_running == 0:
        per_node = math.inf
        requested = node.max_cap_w
    else:
        per_node = (renewable_kw + grid_topup_kw - fixed_kw) / n_running
        requested = node.cap_for_budget_kw(per_node)
    return SitePowerPlan(site, renewable_kw, grid_topup_kw, fixed_kw, n_running, per_node, requested,
                         node.clamp_w(requested))
