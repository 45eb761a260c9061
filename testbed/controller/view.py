"""What a policy may see at a decision point: forecasts, not the truth.

Current renewable power at a site is an observation (a meter reading), so it is the true
value *now*; how long it lasts (the window) and the bandwidth a transfer will get are
forecasts. Moves a policy plans in this round are reflected at once (free nodes, loads).
"""

from __future__ import annotations

from dataclasses import dataclass

from testbed.controller.cluster import Cluster, Status
from testbed.inputs import Inputs


@dataclass(frozen=True)
class JobView:
    id: str
    family: str
    site: str
    checkpoint_gb: float
    work_left_gpu_h: float
    remaining_s: float  # at the current site's speed
    origin: str
    arrival_s: float
    work_gpu_h: float


class ClusterView:
    def __init__(self, now_s: float, cluster: Cluster, inputs: Inputs):
        self.now_s = now_s
        self._c = cluster
        self._in = inputs
        self._planned_in: dict[str, int] = {}
        self._planned_out: dict[str, int] = {}

    # -- sites -----------------------------------------------------------------------------
    @property
    def sites(self) -> list[str]:
        return list(self._c.sites)

    def nodes(self, site: str) -> int:
        return self._c.sites[site].nodes

    def p_active_kw(self, site: str) -> float:
        return self._c.sites[site].node_type.p_active_kw

    def speed(self, site: str) -> float:
        return self._c.sites[site].node_type.speed

    def free_nodes(self, site: str) -> int:
        return self._c.sites[site].free_nodes - self._planned_in.get(site, 0)

    def queue_length(self, site: str) -> int:
        return len(self._c.sites[site].queue)

    def renewable_kw(self, site: str) -> float:
        """Metered renewable power now (an observation, not a forecast)."""
        return self._in.renewable_kw[site].at(self.now_s)

    def load_kw(self, site: str) -> float:
        """Active-node load now, including moves planned in this round."""
        return max(0, self.jobs_after_moves(site)) * self.p_active_kw(site)

    def jobs_after_moves(self, site: str) -> int:
        s = self._c.sites[site]
        return len(s.running) + len(s.incoming) + self._planned_in.get(site, 0) - self._planned_out.get(site, 0)

    def grid_limit_kw(self, site: str) -> float | None:
        return self._c.sites[site].grid_limit_kw

    def grid_only_speed(self, site: str, extra_jobs: int = 0) -> float:
        """Speed fraction a job gets at ``site`` on grid power alone (no renewables), with
        ``extra_jobs`` more jobs than now: 1 with no grid limit, else the power profile's
        throughput at the cap an even share of the limit buys."""
        s = self._c.sites[site]
        n = self.jobs_after_moves(site) + extra_jobs
        if s.grid_limit_kw is None or n <= 0:
            return 1.0
        node = s.power
        return node.throughput_frac(node.clamp_w(node.cap_for_budget_kw(s.grid_limit_kw / n)))

    def surplus_kw(self, site: str) -> float:
        return self.renewable_kw(site) - self.load_kw(site)

    def window_forecast_s(self, site: str) -> float:
        """Forecast remaining renewable window (renewable >= one node's active power)."""
        return self._in.windows.forecast_remaining_s(site, self.now_s)

    def bandwidth_forecast_gbps(self, src: str, dst: str) -> float | None:
        if (src, dst) not in self._in.latency_ms:
            return None
        return self._in.bandwidth.forecast_gbps(src, dst, self.now_s)

    def rtt_ms(self, src: str, dst: str) -> float:
        return 2.0 * self._in.latency_ms[(src, dst)]

    # -- jobs ------------------------------------------------------------------------------
    def _job_view(self, job_id: str) -> JobView:
        j = self._c.jobs[job_id]
        speed = self.speed(j.site)
        return JobView(
            j.spec.id, j.spec.family, j.site, j.spec.checkpoint_gb, j.work_left_gpu_h,
            j.work_left_gpu_h / speed * 3600.0, j.spec.origin, j.spec.arrival_s, j.spec.work_gpu_h,
        )

    def running_jobs(self, site: str) -> list[JobView]:
        """Running jobs at a site, earliest-started first."""
        s = self._c.sites[site]
        ids = sorted(s.running, key=lambda i: (self._c.jobs[i].run_since_s, i))
        return [self._job_view(i) for i in ids]

    def jobs_on_grid(self, site: str) -> list[JobView]:
        """Running jobs that the site's renewable power does not cover (earliest-started are covered first)."""
        jobs = self.running_jobs(site)
        covered = int(max(0.0, self.renewable_kw(site)) // self.p_active_kw(site)) if jobs else 0
        return jobs[covered:]

    def plan_move(self, job_id: str, src: str, dst: str) -> None:
        if self.free_nodes(dst) < 1:
            raise ValueError(f"plan_move: no free node at {dst}")
        if self._c.jobs[job_id].status is not Status.RUNNING:
            raise ValueError(f"plan_move: {job_id} is not running")
        self._planned_in[dst] = self._planned_in.get(dst, 0) + 1
        self._planned_out[src] = self._planned_out.get(src, 0) + 1
