"""The run log: one policy's rows (decisions, migrations, steps, jobs, power) collected during a run
and turned into tables.

Writing files is the results directory's job (:mod:`testbed.recorder`); this only keeps rows.
"""

from __future__ import annotations

from dataclasses import fields

import pandas as pd

from testbed.controller.cluster import Cluster, SiteEnergy, Status
from testbed.controller.policy_api import DecisionRecord
from testbed.controller.records import MIGRATION_COLUMNS, MigrationRecord
from testbed.power.caps import POWER_MEASURED, POWER_MODEL, CapReport, Enforcement, JobCap


class RunLog:
    def __init__(self, label: str):
        self.label = label
        self._decisions: list[dict] = []
        self._migrations: list[dict] = []
        self._steps: list[dict] = []
        self._jobs: list[dict] = []
        self._power: list[dict] = []
        self._power_at: dict[tuple[float, str], dict] = {}

    def decision(self, rec: DecisionRecord) -> None:
        self._decisions.append(rec.row())

    def migration(self, rec: MigrationRecord) -> None:
        self._migrations.append(rec.row())

    def power(self, t_s: float, job_id: str, cap: JobCap, requested_w: float, rep: CapReport | None) -> None:
        """One running job's cap at one trace step: requested, enforced, modelled and measured."""
        self._power.append({
            "t_s": t_s, "site": cap.site, "job_id": job_id, "cap_requested_w": requested_w, "cap_w": cap.cap_w,
            "cap_enforced_w": rep.enforced_cap_w if rep else cap.cap_w,
            "throughput_frac_model": cap.throughput_frac,
            "throughput_frac_enforced": rep.throughput_frac if rep else cap.throughput_frac,
            "gpu_draw_model_w": cap.draw_w,
            # the driver's reading where there is one, else the model's draw; an enforcer that measures
            # after the step (settle) replaces it, e.g. with power derived from the measured throughput
            "gpu_power_w": rep.measured_power_w if rep and rep.measured_power_w is not None else cap.draw_w,
            "gpu_power_basis": POWER_MEASURED if rep and rep.measured_power_w is not None else POWER_MODEL,
            "backend": rep.backend if rep else "model", "throttle": rep.throttle if rep else "",
            "detail": rep.detail if rep else "",
        })
        self._power_at[(t_s, job_id)] = self._power[-1]

    def power_settled(self, t_s: float, job_id: str, enf: Enforcement) -> None:
        """What the step that began at ``t_s`` came to for ``job_id``, measured once it was over."""
        row = self._power_at.get((t_s, job_id))
        if row is None:
            return
        nan = float("nan")
        row["throughput_frac_enforced"] = enf.throughput_frac if enf.throughput_frac is not None else nan
        row["gpu_power_w"] = enf.power_w if enf.power_w is not None else nan
        row["gpu_power_basis"] = enf.power_basis

    def step(self, t0: float, t1: float, energy: dict[str, SiteEnergy], cluster: Cluster) -> None:
        hours = (t1 - t0) / 3600.0
        for name, e in energy.items():
            site = cluster.sites[name]
            self._steps.append({
                "t_s": t0, "dt_s": t1 - t0, "site": name,
                "renewable_available_kw": e.renewable_available_kwh / hours,
                "demand_kw": e.demand_kwh / hours,
                "renewable_used_kw": e.renewable_used_kwh / hours,
                "grid_kw": e.grid_kwh / hours,
                "compute_kwh": e.compute_kwh, "transfer_kwh": e.transfer_kwh, "idle_kwh": e.idle_kwh,
                "demand_kwh": e.demand_kwh, "renewable_used_kwh": e.renewable_used_kwh, "grid_kwh": e.grid_kwh,
                "renewable_available_kwh": e.renewable_available_kwh,
                "compute_renewable_kwh": e.renewable_part(e.compute_kwh),
                "transfer_renewable_kwh": e.renewable_part(e.transfer_kwh),
                "idle_renewable_kwh": e.renewable_part(e.idle_kwh),
                "grid_topup_kw": e.grid_topup_kw if e.grid_topup_kw is not None else float("nan"),
                "overdraw_kwh": e.overdraw_kwh,
                "cap_requested_w": e.cap_requested_w, "cap_w": e.cap_w, "throughput_frac": e.throughput_frac,
                "battery_charge_kwh": e.battery_charge_kwh, "battery_discharge_kwh": e.battery_discharge_kwh,
                "battery_loss_kwh": e.battery_loss_kwh, "battery_soc_kwh": e.battery_soc_kwh,
                "curtailed_kwh": e.curtailed_kwh,
                "carbon_g_per_kwh": e.carbon_g_per_kwh, "price_per_kwh": e.price_per_kwh,
                "co2_kg": e.co2_kg, "grid_cost": e.grid_cost,
                "power_model_kw": e.demand_kwh / hours,
                "running": len(site.running), "waiting": e.waiting, "queued": len(site.queue),
                "incoming": len(site.incoming), "outgoing": len(site.outgoing),
            })

    def finish(self, cluster: Cluster, horizon_s: float) -> None:
        for job in cluster.jobs.values():
            s = job.submission
            done = job.status is Status.DONE
            self._jobs.append({
                "job_id": s.id, "family": s.family, "origin": s.origin, "final_site": job.site,
                "checkpoint_gb": s.checkpoint_gb, "work_gpu_h": s.work_gpu_h, "status": job.status.value,
                "arrival_s": s.arrival_s, "started_s": job.started_s, "finished_s": job.finished_s,
                "jct_h": (job.finished_s - s.arrival_s) / 3600.0 if done else None,
                "queue_wait_h": ((job.started_s if job.started_s is not None else horizon_s) - s.arrival_s) / 3600.0,
                "work_left_gpu_h": job.work_left_gpu_h, "running_s": job.running_s, "migrating_s": job.migrating_s,
                "waiting_s": job.waiting_s,
                "n_migrations": job.n_migrations, "energy_kwh": job.energy_kwh, "renewable_kwh": job.renewable_kwh,
                "transfer_kwh": job.transfer_kwh, "transfer_renewable_kwh": job.transfer_renewable_kwh,
                "compute_kwh": job.energy_kwh - job.transfer_kwh,
                "compute_renewable_kwh": job.renewable_kwh - job.transfer_renewable_kwh,
            })

    def tables(self) -> dict[str, pd.DataFrame]:
        return {
            "timeseries": pd.DataFrame(self._steps),
            "migrations": pd.DataFrame(self._migrations, columns=MIGRATION_COLUMNS if not self._migrations else None),
            "decisions": pd.DataFrame(self._decisions, columns=_DECISION_COLUMNS if not self._decisions else None),
            "jobs": pd.DataFrame(self._jobs),
            "power": pd.DataFrame(self._power, columns=_POWER_COLUMNS if not self._power else None),
        }


_POWER_COLUMNS = [
    "t_s", "site", "job_id", "cap_requested_w", "cap_w", "cap_enforced_w", "throughput_frac_model",
    "throughput_frac_enforced", "gpu_draw_model_w", "gpu_power_w", "gpu_power_basis", "backend", "throttle",
    "detail",
]
_DECISION_COLUMNS = [f.name for f in fields(DecisionRecord)]
