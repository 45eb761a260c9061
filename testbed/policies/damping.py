"""Damping shared by the migrating policies, so that a job does not bounce between sites.

- Minimum dwell: a job that moved (its migration completed or not) must run ``min_dwell_h`` at
  its site before it may move again.
- Return margin: a move back to the site the job's last migration left must save
  ``(1 + return_margin)`` x its energy cost (Eq. 2 with a margin: :mod:`testbed.policies.move_energy`).

``min_dwell_h: 0`` with ``return_margin: 0`` is the paper's behaviour (no damping).
"""

from __future__ import annotations

from testbed.controller.policy_api import ClusterView, JobView
from testbed.feasibility import FeasibilityParams, energy_cost_kwh, transfer_time_s
from testbed.policies.move_energy import MoveEnergy, move_energy


class Damped:
    """Mixin for a :class:`~testbed.controller.policy_api.Policy` whose spec has ``min_dwell_h``
    and ``return_margin`` (``testbed.spec.policies.Damping``); call :meth:`init_damping` in ``__init__``."""

    min_dwell_s: float = 0.0
    return_margin: float = 0.0

    def init_damping(self, spec) -> None:
        self.min_dwell_s = spec.min_dwell_h * 3600.0
        self.return_margin = spec.return_margin

    def held(self, view: ClusterView, job: JobView) -> str | None:
        """Why ``job`` may not move now (None: it may)."""
        dwell = job.dwell_s(view.now_s)
        if dwell is not None and dwell < self.min_dwell_s:
            return (f"on grid; moved {dwell / 3600:.2f} h ago, minimum dwell {self.min_dwell_s / 3600:g} h")
        return None

    def is_return(self, job: JobView, dst: str) -> bool:
        return self.return_margin > 0 and dst == job.prev_site

    def return_ok(self, job: JobView, dst: str, energy: MoveEnergy) -> bool:
        """A move back to the site ``job`` last left pays ``return_margin`` more than Eq. 2 asks."""
        return not self.is_return(job, dst) or energy.pays_off(self.return_margin)

    def reference_energy(self, view: ClusterView, job: JobView, dst: str) -> MoveEnergy:
        """The move's Eq. 2 balance under the scenario's reference model (for policies without their own)."""
        sc = self.scenario  # type: ignore[attr-defined]
        params = FeasibilityParams.from_model(sc.feasibility, rtt_ms=view.rtt_ms(job.site, dst),
                                              p_sys_kw=sc.power.p_sys_kw, p_node_kw=view.p_active_kw(dst))
        bw = view.bandwidth_forecast_gbps(job.site, dst)
        cost = energy_cost_kwh(params.p_sys_kw, transfer_time_s(job.checkpoint_gb, bw, params.corrections))
        return move_energy(view, job, dst, cost_kwh=cost,
                           src_topup_kw=self.grid_topup_kw(view, job.site))  # type: ignore[attr-defined]
