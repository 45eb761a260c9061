"""The controller loop: the same code for every substrate and every policy.

At each decision point ``t`` (every ``step_s``): admit arrivals (the policy places them), start
queued jobs on free nodes, ask the policy for migrations and hand them to the substrate; then
let the substrate advance to ``t + step_s``, account progress and energy exactly within the
step, and record what really happened beside what was predicted.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable

from testbed import step_profile
from testbed.controller.cluster import Cluster, InFlight, SiteState
from testbed.controller.battery import Battery
from testbed.controller.run_log import RunLog
from testbed.controller.records import MigrationRecord
from testbed.crosstraffic.predict import BandwidthEstimator, basis_of
from testbed.controller.policy_api import ClusterView, Move, Policy, share_window_s
from testbed.feasibility import FeasibilityParams, assess
from testbed.inputs import Inputs
from testbed.link import rtt_ms as round_trip_ms
from testbed.power.budget import SitePowerPlan, plan_site
from testbed.power.caps import CapEnforcer, JobCap
from testbed.power.errors import PowerError
from testbed.power.model_caps import ModelCaps
from testbed.substrate.base import MigrationOrder, MigrationOutcome, Substrate


class Controller:
    def __init__(self, inputs: Inputs, policy: Policy, substrate: Substrate,
                 on_step: Callable[[int, int], None] | None = None, caps: CapEnforcer | None = None,
                 policy_name: str | None = None):
        """``caps``: the run's cap enforcer (:func:`testbed.power.factory.make_enforcer`, entered by
        the caller); None = the profile's model (``power.backend: model``). ``policy_name``: the
        scenario entry's ``name`` (the tables' ``policy``; default: the policy's label)."""
        self.caps = caps if caps is not None else ModelCaps.for_scenario(inputs.scenario)
        self.inputs = inputs
        self.policy = policy
        self.substrate = substrate
        self.on_step = on_step
        sc = inputs.scenario
        self.cluster = Cluster(
            [SiteState(s.name, s.nodes, sc.node_type_of(s.name), grid_limit_kw=sc.grid_limit_kw(s.name),
                       battery=Battery.of(sc.battery(s.name)) if sc.battery(s.name) is not None else None)
             for s in sc.sites],
            sc.power.p_sys_kw,
        )
        self.run_log = RunLog(policy.label, start=inputs.scenario.start, policy=policy_name)
        basis, probe_s = basis_of(policy, sc)
        self.bandwidth = BandwidthEstimator(inputs, basis, probe_s=probe_s,
                                            prober=getattr(substrate, "probe_bandwidth", None))

    def _record_for(self, move: Move, now_s: float) -> MigrationRecord:
        sc, inp = self.inputs.scenario, self.inputs
        job = self.cluster.jobs[move.job_id]
        pred = move.prediction
        dst = self.cluster.sites[move.dst]
        jobs_ahead = len(dst.running) + len(dst.incoming)  # the window is this job's share (policy_api.share_window_s)
        if pred is None:  # policies without a model: record the scenario's reference prediction
            params = FeasibilityParams.from_model(
                sc.feasibility, rtt_ms=round_trip_ms(inp.latency_ms[(move.src, move.dst)]), p_sys_kw=sc.power.p_sys_kw,
                p_node_kw=sc.node_type_of(move.dst).p_active_kw,
            )
            window = share_window_s(inp, move.dst, now_s, jobs_ahead, forecast=True)
            bw = self.bandwidth.gbps(move.src, move.dst, now_s)
            pred = assess(job.submission.checkpoint_gb, bw, max(window, 1e-9), params)
        true_window = share_window_s(inp, move.dst, now_s, jobs_ahead, forecast=False)
        probe = self.bandwidth.probe_for(move.src, move.dst, now_s)
        return MigrationRecord(
            policy=self.policy.label, job_id=move.job_id, family=job.submission.family, src=move.src, dst=move.dst,
            checkpoint_gb=job.submission.checkpoint_gb, t_decision_s=now_s, reason=move.reason, predicted=pred,
            true_window_s=true_window, true_budget_s=pred.alpha * true_window, trigger=move.trigger,
            predicted_bandwidth_basis=self.bandwidth.basis,
            probe_s=None if probe is None else probe.scenario_s, probe_bytes=None if probe is None else probe.bytes_sent,
        )

    @staticmethod
    def _finalize(rec: MigrationRecord, out: MigrationOutcome) -> None:
        rec.finish(out)  # every phase as outcome_*, measured ones also as actual_* (records.py)

    def _admit_arrivals(self, pending: deque, now_s: float) -> None:
        while pending and pending[0].arrival_s <= now_s:
            submission = pending.popleft()
            site, rec = self.policy.place(submission, ClusterView(now_s, self.cluster, self.inputs, self.bandwidth))
            self.run_log.decision(rec)
            self.cluster.admit(submission, site, now_s)
            self._start_queued(now_s)

    def _plan_power(self, t0: float, t1: float, renewable_kwh: dict[str, float]) -> dict[str, SitePowerPlan]:
        """Trace to cap: each site's true renewable power over the step, what its battery can deliver
        over the step, plus the policy's grid top-up (decided from what the policy sees at ``t0``)
        sets its running nodes' caps."""
        view = ClusterView(t0, self.cluster, self.inputs)
        plans = {}
        for name, site in self.cluster.sites.items():
            topup = self.policy.grid_topup_kw(view, name)
            if topup is not None and (topup < 0 or (site.grid_limit_kw is not None and topup > site.grid_limit_kw + 1e-9)):
                raise ValueError(f"policy {self.policy.label}: grid top-up {topup} kW at {name} outside [0, grid limit]")
            battery_kw = site.battery.available_kw(t1 - t0) if site.battery is not None else 0.0
            plans[name] = plan_site(
                name, site.power, renewable_kw=renewable_kwh[name] * 3600.0 / (t1 - t0) + battery_kw, grid_topup_kw=topup,
                n_running=len(site.running), n_idle=max(0, site.free_nodes),
                n_transfer_ends=len(site.incoming) + len(site.outgoing), p_sys_kw=self.cluster.p_sys_kw,
            )
        return plans

    def _apply_caps(self, t0: float, plans: dict[str, SitePowerPlan]) -> dict[str, float]:
        """Hand this step's caps to the run's cap enforcer; returns the enforced cap per job (within
        the profile's range, which a real GPU's may exceed)."""
        caps = {}
        requested_w: dict[str, float] = {}
        held = self.cluster.waiting_jobs(plans)  # over the grid limit even at the lowest cap: no work
        for name, plan in plans.items():
            node = self.cluster.sites[name].power
            for job_id in self.cluster.sites[name].running:
                if job_id in held:  # accounted as held (no progress, idle node); the backend gets the lowest cap,
                    # the closest a backend comes to holding it (an agent paced near zero could not be woken)
                    low = node.min_cap_w
                    caps[job_id] = JobCap(name, low, node.throughput_frac(low), node.profile.draw_w(low))
                    requested_w[job_id] = 0.0
                    continue
                caps[job_id] = JobCap(name, plan.cap_w, node.throughput_frac(plan.cap_w), node.profile.draw_w(plan.cap_w))
        reports = self.caps.apply(t0, caps) if caps else {}
        enforced = {}
        for job_id, cap in caps.items():
            rep = reports.get(job_id)
            if rep is None:
                raise PowerError(f"power backend {self.caps.name}: no report for job {job_id} at t={t0:g} s")
            enforced[job_id] = self.cluster.sites[cap.site].power.clamp_w(rep.enforced_cap_w)
            self.run_log.power(t0, job_id, cap, requested_w.get(job_id, plans[cap.site].cap_requested_w), rep)
        return enforced

    def _start_queued(self, now_s: float) -> None:
        for job in self.cluster.start_queued(now_s):
            self.substrate.start_job(job.submission.id, job.site, now_s)

    def run(self) -> RunLog:
        sc = self.inputs.scenario
        dt, horizon = sc.step_s, sc.duration_s
        n_steps = math.ceil(horizon / dt - 1e-9)
        pending = deque(self.inputs.jobs)
        in_flight: list[InFlight] = []
        part = step_profile.part
        prof = step_profile.active()
        if prof is not None:
            prof.begin_run(self.substrate.name, self.run_log.label)
        for k in range(n_steps):
            if prof is not None:
                prof.step_start()
            t0, t1 = k * dt, min(horizon, (k + 1) * dt)
            with part("policy"):
                self._start_queued(t0)
                self._admit_arrivals(pending, t0)
                moves, decisions = self.policy.decide(ClusterView(t0, self.cluster, self.inputs, self.bandwidth))
            with part("record"):
                for rec in decisions:
                    self.run_log.decision(rec)
            if moves:
                with part("caps"):  # an enforcer that measures after the fact reads them while they still run
                    self.caps.leaving(t0, [m.job_id for m in moves], finished=False)
            with part("policy"):
                for move in moves:
                    mrec = self._record_for(move, t0)
                    self.cluster.begin_migration(move.job_id, move.dst, mrec, t0)
                    self.substrate.start_migration(  # a probe's time is charged: the move starts once it is done
                        MigrationOrder(move.job_id, move.src, move.dst,
                                       self.cluster.jobs[move.job_id].submission.checkpoint_gb, t0 + (mrec.probe_s or 0.0))
                    )
                    in_flight.append(self.cluster.jobs[move.job_id].migration)  # type: ignore[arg-type]
            with part("plan"):
                renewable_kwh = {s: tr.integrate(t0, t1) / 3600.0 for s, tr in self.inputs.renewable_kw.items()}
                plans = self._plan_power(t0, t1, renewable_kwh)
            with part("caps"):
                job_caps = self._apply_caps(t0, plans)
            for outcome in self.substrate.poll(t1):
                self.cluster.report(outcome)
            with part("settle"):
                settled = self.caps.settle_steps(t0, t1, final=k == n_steps - 1)
            with part("record"):
                for t_step, job_id, enf in settled:  # what the caps came to, measured after the step (or later)
                    self.run_log.power_settled(t_step, job_id, enf)
            with part("account"):
                energy, finished, ended = self.cluster.advance(t0, t1, renewable_kwh, plans, job_caps)
                grid = self.inputs.grid
                for name, e in energy.items():  # the grid energy's carbon and cost (the step's mean signals)
                    carbon = grid.step_mean(grid.carbon_g_per_kwh, name, t0, t1)
                    price = grid.step_mean(grid.price_per_kwh, name, t0, t1)
                    e.carbon_g_per_kwh = float("nan") if carbon is None else carbon
                    e.price_per_kwh = float("nan") if price is None else price
            with part("record"):
                for mig in ended:
                    self._finalize(mig.record, mig.outcome)  # type: ignore[arg-type]
                    self.run_log.migration(mig.record)
                    in_flight.remove(mig)
            if finished:
                with part("caps"):
                    self.caps.leaving(t1, [job.submission.id for job in finished], finished=True)
            with part("policy"):
                for job in finished:
                    self.substrate.finish_job(job.submission.id, job.finished_s)  # type: ignore[arg-type]
            with part("record"):
                self.run_log.step(t0, t1, energy, self.cluster)
                if self.on_step is not None:
                    self.on_step(k + 1, n_steps)
            if prof is not None:
                prof.step_done()
        for mig in in_flight:  # still moving when the run ended: recorded, never dropped
            mig.record.status = "unfinished"
            mig.record.detail = "still in flight at the end of the run"
            self.run_log.migration(mig.record)
        self.run_log.finish(self.cluster, horizon)
        samples = getattr(self.substrate, "cross_traffic_samples", None)
        if samples is not None:
            self.run_log.cross_traffic(samples())
        return self.run_log
