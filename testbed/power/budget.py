"""Trace to cap: the power a site may draw at one trace step decides its nodes' GPU caps.

At each step a site's budget is the renewable power it really has (the trace: the backend gets
the truth) plus the grid top-up the policy chose (at most the site's grid limit; ``None`` =
unlimited). The budget feeds, in order: migrations in flight (``P_sys/2`` at each end, seed
Eq. 2), idle nodes (``p_idle_kw``), then the running nodes, which share what is left evenly —
each node's share becomes its cap through :meth:`NodePower.cap_for_budget_kw`.

When the share is too small for even the GPU's lowest cap (``min_cap_w``), work waits: the
fewest running jobs that must stop to fit are held (``n_waiting``), their nodes idle
(``p_idle_kw``) and make no progress, and the others share what is left (each then at or above
the lowest cap). With ``k`` of ``n`` running nodes training::

    fixed + (n - k) * p_idle + k * P_active(min_cap) <= budget,   k as large as fits

Which jobs wait is the cluster's choice (:meth:`testbed.controller.cluster.Cluster.waiting_jobs`:
those started or moved in most recently). Only what cannot be cut can still exceed the budget:
transfers in flight, idle and waiting nodes, a migration's load phase and a job resuming mid-step
after one (neither is planned), and nodes whose lowest cap draws no more than idle. That energy is
accounted as grid power over the limit (``overdraw_kwh``), never hidden.
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
    n_waiting: int = 0            # running jobs held this step (no work, node idle) so the rest fit the budget

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
        n_waiting = _n_waiting(node, renewable_kw + grid_topup_kw - fixed_kw, n_running)
        if 0 < n_waiting < n_running:
            n_train = n_running - n_waiting
            per_node = (renewable_kw + grid_topup_kw - fixed_kw - n_waiting * node.node_type.p_idle_kw) / n_train
            requested = max(node.min_cap_w, node.cap_for_budget_kw(per_node))
        return SitePowerPlan(site, renewable_kw, grid_topup_kw, fixed_kw, n_running, per_node, requested,
                             node.clamp_w(requested), n_waiting)
    return SitePowerPlan(site, renewable_kw, grid_topup_kw, fixed_kw, n_running, per_node, requested,
                         node.clamp_w(requested))


def _n_waiting(node: NodePower, room_kw: float, n_running: int) -> int:
    """How many of ``n_running`` jobs must wait so that the rest train at or above the lowest cap
    within ``room_kw`` (the budget left after transfers and idle nodes); 0 if all fit."""
    floor_kw = node.active_kw(node.min_cap_w)
    idle_kw = node.node_type.p_idle_kw
    if room_kw >= n_running * floor_kw - 1e-12 or floor_kw <= idle_kw:
        return 0
    n_train = math.floor((room_kw - n_running * idle_kw) / (floor_kw - idle_kw) + 1e-9)
    return n_running - min(n_running, max(0, n_train))
