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

from testbed.controller.battery import Battery
from testbed.power.budget import SitePowerPlan
from testbed.power.node_model import NodePower
from testbed.spec.topology import NodeType
from testbed.substrate.base import MigrationOutcome
from testbed.workload import JobSubmission
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
class ClusterJob:
    """A job's runtime state in the cluster: its fixed submission, where it is and what it has done so far
    (policies see it through :class:`testbed.controller.policy_api.JobView`)."""

    submission: JobSubmission
    status: Status
    site: str
    work_left_gpu_h: float
    run_since_s: float = 0.0
    started_s: float | None = None
    finished_s: float | None = None
    migration: InFlight | None = None
    migrating_s: float = 0.0
    running_s: float = 0.0
    waiting_s: float = 0.0  # held by its site's grid limit (testbed.power.budget): no work, node idle
    n_migrations: int = 0
    prev_site: str | None = None  # the site its last completed migration left
    energy_kwh: float = 0.0
    renewable_kwh: float = 0.0
    transfer_kwh: float = 0.0
    transfer_renewable_kwh: float = 0.0


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
    power: NodePower | None = None
    battery: Battery | None = None  # charged from curtailed renewables, discharged before the grid

    def __post_init__(self) -> None:
        if self.power is None:
            self.power = NodePower.of(self.node_type, self.name)

    @property
    def free_nodes(self) -> int:
        return self.nodes - len(self.running) - len(self.incoming) - len(self.outgoing)


@dataclass
class SiteEnergy:
    """One site over one step (kWh). Renewable energy (used directly or delivered by the site's
    battery) is shared pro rata over compute, transfer and idle demand, so every split closes
    exactly: ``renewable_used + battery_discharge = sum of the *_renewable``. Grid energy is what
    is left: ``demand - renewable_used - battery_discharge``; its carbon and cost are the step's
    mean carbon intensity and price times it."""

    demand_kwh: float = 0.0
    compute_kwh: float = 0.0
    transfer_kwh: float = 0.0
    idle_kwh: float = 0.0
    renewable_available_kwh: float = 0.0
    renewable_used_kwh: float = 0.0
    busy_node_s: float = 0.0
    cap_requested_w: float = float("nan")  # per running node, from the trace step's budget (nan: none running)
    cap_w: float = float("nan")            # per running node, as enforced (clamped to the GPU's range)
    throughput_frac: float = 1.0           # speed of a running node under cap_w, relative to uncapped
    grid_topup_kw: float | None = None     # the policy's grid allowance this step (None: unlimited)
    grid_limit_kwh: float | None = None    # the energy that allowance permits over the step
    waiting: int = 0                       # running jobs held this step so the rest fit the budget
    battery_charge_kwh: float = 0.0        # taken from the renewable surplus (before the charging loss)
    battery_discharge_kwh: float = 0.0     # delivered to the site's demand
    battery_loss_kwh: float = 0.0          # the round-trip loss, booked when charging
    battery_soc_kwh: float = float("nan")  # at the step's end (nan: no battery)
    carbon_g_per_kwh: float = float("nan")  # mean carbon intensity of grid power over the step (nan: no trace)
    price_per_kwh: float = float("nan")     # mean price of grid power over the step (nan: no trace)

    @property
    def grid_kwh(self) -> float:
        return self.demand_kwh - self.renewable_used_kwh - self.battery_discharge_kwh

    @property
    def curtailed_kwh(self) -> float:
        """Renewable energy neither used nor stored."""
        return self.renewable_available_kwh - self.renewable_used_kwh - self.battery_charge_kwh

    @property
    def co2_kg(self) -> float:
        return self.grid_kwh * self.carbon_g_per_kwh / 1000.0

    @property
    def grid_cost(self) -> float:
        return self.grid_kwh * self.price_per_kwh

    @property
    def renewable_share(self) -> float:
        green = self.renewable_used_kwh + self.battery_discharge_kwh
        return green / self.demand_kwh if self.demand_kwh > 0 else 0.0

    def renewable_part(self, kwh: float) -> float:
        return kwh * self.renewable_share

    @property
    def overdraw_kwh(self) -> float:
        """Grid energy beyond the allowance: what holding jobs cannot cut (transfers, idle nodes)."""
        if self.grid_limit_kwh is None:
            return 0.0
        return max(0.0, self.grid_kwh - self.grid_limit_kwh)


class Cluster:
    def __init__(self, sites: list[SiteState], p_sys_kw: float):
        self.sites = {s.name: s for s in sites}
        self.jobs: dict[str, ClusterJob] = {}
        self.p_sys_kw = p_sys_kw

    # -- lifecycle -------------------------------------------------------------------------
    def admit(self, submission: JobSubmission, site: str, now_s: float) -> ClusterJob:
        job = ClusterJob(submission=submission, status=Status.QUEUED, site=site, work_left_gpu_h=submission.work_gpu_h)
        self.jobs[submission.id] = job
        self.sites[site].queue.append(submission.id)
        return job

    def start_queued(self, now_s: float) -> list[ClusterJob]:
        """FIFO per site: start queued jobs on free nodes. Returns the jobs started."""
        started = []
        for site in self.sites.values():
            while site.queue and site.free_nodes > 0:
                job = self.jobs[site.queue.pop(0)]
                job.status, job.run_since_s, job.started_s = Status.RUNNING, now_s, now_s
                site.running.append(job.submission.id)
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

    def waiting_jobs(self, plans: dict[str, SitePowerPlan]) -> set[str]:
        """The running jobs each site's plan holds this step (``plan.n_waiting``): the last in
        ``site.running``, i.e. those started or moved in most recently, so the jobs that have run
        there longest keep running."""
        out: set[str] = set()
        for name, plan in plans.items():
            running = self.sites[name].running
            if plan.n_waiting > 0:
                out.update(running[max(0, len(running) - plan.n_waiting):])
        return out

    # -- one step ----------------------------------------------------------------------------
    def advance(self, t0: float, t1: float, renewable_kwh: dict[str, float],
                plans: dict[str, SitePowerPlan] | None = None,
                job_caps_w: dict[str, float] | None = None) -> tuple[dict[str, SiteEnergy], list[ClusterJob], list[InFlight]]:
        """Account [t0, t1). Returns per-site energy, jobs finished and migrations ended in the step.

        ``plans``: this step's power plan per site (its GPU cap for running nodes and grid top-up;
        default: uncapped, top-up = the grid limit); ``job_caps_w`` overrides the cap per job with
        what the backend reports as enforced."""
        dt = t1 - t0
        plans = plans or {}
        job_caps_w = job_caps_w or {}
        waiting = self.waiting_jobs(plans)
        caps_w = {name: (plans[name].cap_w if name in plans else site.power.max_cap_w)
                  for name, site in self.sites.items()}
        energy = {}
        for name, site in self.sites.items():
            plan = plans.get(name)
            cap = caps_w[name]
            topup = plan.grid_topup_kw if plan is not None else site.grid_limit_kw
            requested = plan.cap_requested_w if plan is not None else cap
            n_held = plan.n_waiting if plan is not None else 0
            energy[name] = SiteEnergy(
                renewable_available_kwh=renewable_kwh[name],
                cap_requested_w=requested if len(site.running) > n_held else float("nan"),
                cap_w=cap if len(site.running) > n_held else float("nan"),
                throughput_frac=site.power.throughput_frac(cap),
                grid_topup_kw=topup, grid_limit_kwh=None if topup is None else topup * dt / 3600.0,
                waiting=n_held,
            )
        job_site_kwh: dict[tuple[str, str, str], float] = {}
        finished: list[ClusterJob] = []
        ended: list[InFlight] = []

        def draw(job: ClusterJob, site: str, kw: float, seconds: float, kind: str) -> None:
            kwh = kw * seconds / 3600.0
            e = energy[site]
            e.demand_kwh += kwh
            e.busy_node_s += seconds
            if kind == "transfer":
                e.transfer_kwh += kwh
                job.transfer_kwh += kwh
            else:
                e.compute_kwh += kwh
            key = (job.submission.id, site, kind)
            job_site_kwh[key] = job_site_kwh.get(key, 0.0) + kwh

        for job in list(self.jobs.values()):
            run_from = t0
            if job.status is Status.MIGRATING:
                mig = job.migration
                assert mig is not None
                half = self.p_sys_kw / 2.0
                out = mig.outcome
                a = max(t0, mig.t_start_s)
                if out is None:  # in flight, its phases not known yet: charged as transfer until they are
                    if t1 > a:
                        draw(job, mig.src, half, t1 - a, "transfer")
                        draw(job, mig.dst, half, t1 - a, "transfer")
                    job.migrating_s += t1 - a
                    continue
                # the phases in order: checkpoint write at the source, transfer, load at the destination
                ckpt_end = mig.t_start_s + out.checkpoint_s
                xfer_end = ckpt_end + out.transfer_s
                if min(t1, ckpt_end) > a:  # writing the checkpoint: the source node at full power
                    draw(job, mig.src, self.sites[mig.src].node_type.p_active_kw, min(t1, ckpt_end) - a, "compute")
                x0, x1 = max(a, ckpt_end), min(t1, xfer_end)
                if x1 > x0:
                    draw(job, mig.src, half, x1 - x0, "transfer")
                    draw(job, mig.dst, half, x1 - x0, "transfer")
                resume = out.resume_s
                back_to = mig.dst if out.status == "completed" else mig.src
                b = max(a, xfer_end)
                if resume > b:  # loading at full power (no cap was planned for it this step)
                    draw(job, back_to, self.sites[back_to].node_type.p_active_kw, resume - b, "compute")
                job.migrating_s += resume - a
                self._finish_migration(job, back_to, resume)
                ended.append(mig)
                run_from = resume
            if job.status is Status.RUNNING and job.submission.id in waiting:
                job.waiting_s += t1 - t0  # its node is idle: counted with the idle nodes below
                continue
            if job.status is Status.RUNNING:
                site = self.sites[job.site]
                cap = job_caps_w.get(job.submission.id, caps_w[job.site])
                speed = site.power.speed(cap)
                t_done = run_from + job.work_left_gpu_h / speed * 3600.0 if speed > 0 else float("inf")
                t_end = min(t1, t_done)
                if t_end > run_from:
                    draw(job, job.site, site.power.active_kw(cap), t_end - run_from, "compute")
                    job.running_s += t_end - run_from
                    job.work_left_gpu_h -= (t_end - run_from) / 3600.0 * speed
                if t_done <= t1:
                    job.work_left_gpu_h = 0.0
                    job.status, job.finished_s = Status.DONE, t_done
                    site.running.remove(job.submission.id)
                    finished.append(job)

        for name, site in self.sites.items():
            e = energy[name]
            idle_s = max(0.0, site.nodes * dt - e.busy_node_s)
            e.idle_kwh = site.node_type.p_idle_kw * idle_s / 3600.0
            e.demand_kwh += e.idle_kwh
            e.renewable_used_kwh = min(e.demand_kwh, e.renewable_available_kwh)
            if site.battery is not None:
                b = site.battery.step(dt, surplus_kwh=max(0.0, e.renewable_available_kwh - e.renewable_used_kwh),
                                      deficit_kwh=max(0.0, e.demand_kwh - e.renewable_used_kwh))
                e.battery_charge_kwh, e.battery_discharge_kwh = b.charge_kwh, b.discharge_kwh
                e.battery_loss_kwh, e.battery_soc_kwh = b.loss_kwh, b.soc_kwh
        for (job_id, site, kind), kwh in job_site_kwh.items():
            job = self.jobs[job_id]
            ren = energy[site].renewable_part(kwh)
            job.energy_kwh += kwh
            job.renewable_kwh += ren
            if kind == "transfer":
                job.transfer_renewable_kwh += ren
        return energy, finished, ended

    def _finish_migration(self, job: ClusterJob, site: str, resume_s: float) -> None:
        mig = job.migration
        assert mig is not None
        self.sites[mig.src].outgoing.remove(job.submission.id)
        self.sites[mig.dst].incoming.remove(job.submission.id)
        if site != mig.src:
            job.prev_site = mig.src
        job.site = site
        job.status = Status.RUNNING
        job.run_since_s = resume_s
        self.sites[site].running.append(job.submission.id)
        job.migration = None
