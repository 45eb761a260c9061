"""Cluster state: where each job is, what each node does, and the energy it draws.

Progress and energy are accounted exactly within a step: a job that finishes, or a migration
that ends, mid-step is accounted up to that instant. One approximation: a migration whose
outcome the substrate has not yet reported is accounted as transferring for the whole step
(P_sys split between both ends), so the load/downtime seconds of a migration that resumes just
after a step boundary are counted at P_sys/2 + P_sys/2 instead of P_active at the destination.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from testbed.spec.topology import NodeType
from testbed.substrate.base import MigrationOutcome
from testbed.workload import JobSpec
from testbed.controller.records import MigrationRecord


class Status(str, Enum):
    QUEUED = "queued"
    RUNNING = "running"
    MIGRATING = "migrating"
    DONE = "done"


@dataclass
class InFlight:
    record: MigrationRecord
    src: str
    dst: str
    t_start_s: float
    outcome: MigrationOutcome | None = None


@dataclass
class Job:
    spec: JobSpec
    status: Status
    site: str
    work_left_gpu_h: float
    run_since_s: float = 0.0
    started_s: float | None = None
    finished_s: float | None = None
    migration: InFlight | None = None
    migrating_s: float = 0.0
    running_s: float = 0.0
    n_migrations: int = 0
    energy_kwh: float = 0.0
    renewable_kwh: float = 0.0
    transfer_kwh: float = 0.0


@dataclass
class SiteState:
    name: str
    nodes: int
    node_type: NodeType
    running: list[str] = field(default_factory=list)
    queue: list[str] = field(default_factory=list)
    incoming: list[str] = field(default_factory=list)
    outgoing: list[str] = field(default_factory=list)
    grid_limit_kw: float | None = None

    @property
    def free_nodes(self) -> int:
        return self.nodes - len(self.running) - len(self.incoming) - len(self.outgoing)


@dataclass
class SiteEnergy:
    """One site over one step (kWh)."""

    demand_kwh: float = 0.0
    compute_kwh: float = 0.0
    transfer_kwh: float = 0.0
    idle_kwh: float = 0.0
    renewable_available_kwh: float = 0.0
    renewable_used_kwh: float = 0.0
    busy_node_s: float = 0.0
    cap_frac: float = 1.0  # power cap on running jobs this step (1 = uncapped)

    @property
    def grid_kwh(self) -> float:
        return self.demand_kwh - self.renewable_used_kwh


class Cluster:
    def __init__(self, sites: list[SiteState], p_sys_kw: float):
        self.sites = {s.name: s for s in sites}
        self.jobs: dict[str, Job] = {}
        self.p_sys_kw = p_sys_kw

    # -- lifecycle -------------------------------------------------------------------------
    def admit(self, spec: JobSpec, site: str, now_s: float) -> Job:
        job = Job(spec=spec, status=Status.QUEUED, site=site, work_left_gpu_h=spec.work_gpu_h)
        self.jobs[spec.id] = job
        self.sites[site].queue.append(spec.id)
        return job

    def start_queued(self, now_s: float) -> list[Job]:
        """FIFO per site: start queued jobs on free nodes. Returns the jobs started."""
        started = []
        for site in self.sites.values():
            while site.queue and site.free_nodes > 0:
                job = self.jobs[site.queue.pop(0)]
                job.status, job.run_since_s, job.started_s = Status.RUNNING, now_s, now_s
                site.running.append(job.spec.id)
                started.append(job)
        return started

    def begin_migration(self, job_id: str, dst: str, record: MigrationRecord, now_s: float) -> None:
        job = self.jobs[job_id]
        src = self.sites[job.site]
        if job.status is not Status.RUNNING or self.sites[dst].free_nodes < 1:
            raise ValueError(f"cannot migrate {job_id}: status {job.status.value}, free at {dst}: {self.sites[dst].free_nodes}")
        src.running.remove(job_id)
        src.outgoing.append(job_id)
        self.sites[dst].incoming.append(job_id)
        job.status = Status.MIGRATING
        job.migration = InFlight(record, job.site, dst, now_s)
        job.n_migrations += 1

    def report(self, outcome: MigrationOutcome) -> None:
        self.jobs[outcome.order.job_id].migration.outcome = outcome  # type: ignore[union-attr]

    # -- one step ----------------------------------------------------------------------------
    def cap_frac(self, site: SiteState, renewable_kw: float) -> float:
        """Power cap on a site's running jobs when renewables + grid limit cannot feed them all.

        Throughput is taken as proportional to power (a linear power/performance profile);
        transfers and idle nodes are fed first. Uses the state at the start of the step."""
        if site.grid_limit_kw is None or not site.running:
            return 1.0
        nt = site.node_type
        idle = max(0, site.free_nodes)
        fixed_kw = idle * nt.p_idle_kw + (len(site.incoming) + len(site.outgoing)) * self.p_sys_kw / 2.0
        budget_kw = renewable_kw + site.grid_limit_kw - fixed_kw
        return min(1.0, max(0.0, budget_kw / (len(site.running) * nt.p_active_kw)))

    def advance(self, t0: float, t1: float, renewable_kwh: dict[str, float]) -> tuple[dict[str, SiteEnergy], list[Job], list[InFlight]]:
        """Account [t0, t1). Returns per-site energy, jobs finished and migrations ended in the step."""
        dt = t1 - t0
        energy = {
            name: SiteEnergy(renewable_available_kwh=renewable_kwh[name],
                             cap_frac=self.cap_frac(site, renewable_kwh[name] * 3600.0 / dt))
            for name, site in self.sites.items()
        }
        job_site_kwh: dict[tuple[str, str], float] = {}
        finished: list[Job] = []
        ended: list[InFlight] = []

        def draw(job: Job, site: str, kw: float, seconds: float, kind: str) -> None:
            kwh = kw * seconds / 3600.0
            e = energy[site]
            e.demand_kwh += kwh
            e.busy_node_s += seconds
            if kind == "transfer":
                e.transfer_kwh += kwh
                job.transfer_kwh += kwh
            else:
                e.compute_kwh += kwh
            job_site_kwh[(job.spec.id, site)] = job_site_kwh.get((job.spec.id, site), 0.0) + kwh

        for job in list(self.jobs.values()):
            run_from = t0
            if job.status is Status.MIGRATING:
                mig = job.migration
                assert mig is not None
                half = self.p_sys_kw / 2.0
                out = mig.outcome
                t_xfer_end = t1 if out is None else min(t1, mig.t_start_s + out.transfer_s)
                a = max(t0, mig.t_start_s)
                if t_xfer_end > a:
                    draw(job, mig.src, half, t_xfer_end - a, "transfer")
                    draw(job, mig.dst, half, t_xfer_end - a, "transfer")
                if out is None:
                    job.migrating_s += t1 - a
                    continue
                resume = out.resume_s
                back_to = mig.dst if out.status == "completed" else mig.src
                b = max(t0, mig.t_start_s + out.transfer_s)
                if resume > b:
                    draw(job, back_to, self.sites[back_to].node_type.p_active_kw, resume - b, "compute")
                job.migrating_s += resume - a
                self._finish_migration(job, back_to, resume)
                ended.append(mig)
                run_from = resume
            if job.status is Status.RUNNING:
                site = self.sites[job.site]
                cap = energy[job.site].cap_frac
                speed = site.node_type.speed * cap
                t_done = run_from + job.work_left_gpu_h / speed * 3600.0 if speed > 0 else float("inf")
                t_end = min(t1, t_done)
                if t_end > run_from:
                    draw(job, job.site, site.node_type.p_active_kw * cap, t_end - run_from, "compute")
                    job.running_s += t_end - run_from
                    job.work_left_gpu_h -= (t_end - run_from) / 3600.0 * speed
                if t_done <= t1:
                    job.work_left_gpu_h = 0.0
                    job.status, job.finished_s = Status.DONE, t_done
                    site.running.remove(job.spec.id)
                    finished.append(job)

        for name, site in self.sites.items():
            e = energy[name]
            idle_s = max(0.0, site.nodes * dt - e.busy_node_s)
            e.idle_kwh = site.node_type.p_idle_kw * idle_s / 3600.0
            e.demand_kwh += e.idle_kwh
            e.renewable_used_kwh = min(e.demand_kwh, e.renewable_available_kwh)
        for (job_id, site), kwh in job_site_kwh.items():
            e = energy[site]
            job = self.jobs[job_id]
            job.energy_kwh += kwh
            if e.demand_kwh > 0:
                job.renewable_kwh += kwh * e.renewable_used_kwh / e.demand_kwh
        return energy, finished, ended

    def _finish_migration(self, job: Job, site: str, resume_s: float) -> None:
        mig = job.migration
        assert mig is not None
        self.sites[mig.src].outgoing.remove(job.spec.id)
        self.sites[mig.dst].incoming.remove(job.spec.id)
        job.site = site
        job.status = Status.RUNNING
        job.run_since_s = resume_s
        self.sites[site].running.append(job.spec.id)
        job.migration = None
