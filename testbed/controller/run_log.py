"""The run log: one policy's rows (decisions, migrations, steps, jobs, power) collected during a run
and turned into tables.

Writing files is the results directory's job (:mod:`testbed.recorder`); this only keeps rows.
"""

from __future__ import annotations

from dataclasses import fields
from datetime import datetime

import pandas as pd

from testbed.controller.cluster import Cluster, SiteEnergy, Status
from testbed.controller.policy_api import DecisionRecord
from testbed.controller.records import MIGRATION_COLUMNS, MIGRATION_DTYPES, MigrationRecord
from testbed.power.caps import POWER_MEASURED, POWER_MODEL, CapReport, Enforcement, JobCap
from testbed.recorder.tables import dtypes_of, typed, with_policy, with_time


class RunLog:
    def __init__(self, label: str, start: datetime | None = None, policy: str | None = None):
        """``start``: the scenario's absolute start; every ``t_s`` gets a UTC ``time`` beside it.
        ``policy``: the policy's name (summary.json's ``policy``; default ``label``): every table
        gets ``policy`` and ``label`` columns."""
        self.label = label
        self.start = start
        self.policy = policy or label
        self._decisions: list[dict] = []
        self._candidates: list[dict] = []
        self._scores: list[dict] = []
        self._migrations: list[dict] = []
        self._steps: list[dict] = []
        self._jobs: list[dict] = []
        self._power: list[dict] = []
        self._power_at: dict[tuple[float, str], dict] = {}

    def decision(self, rec: DecisionRecord) -> None:
        """One decision row (numbered ``decision``); its candidates go to the ``candidates`` table and
        their scores, by name, to ``candidate_scores``, both keyed by that number."""
        n = len(self._decisions)
        self._decisions.append({"decision": n, **rec.row()})
        for rank, cand in enumerate(rec.candidates):
            row = cand.row()
            self._candidates.append({
                "decision": n, "rank": rank, "t_s": rec.t_s, "job_id": rec.job_id, "src": rec.src, "dst": cand.dst,
                **{k: row.get(k) for k in ("bandwidth_gbps", "window_s", "total_s", "budget_s", "eq1_ok", "eq2_ok")},
                "feasibility_class": row.get("class"), "chosen": cand.dst == rec.dst})
            self._scores += [{"decision": n, "rank": rank, "dst": cand.dst, "score": name, "value": float(value)}
                             for name, value in cand.scores]

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
                "checkpoint_gb": s.checkpoint_gb, "work_gpu_h": s.work_gpu_h,
                "status": JOB_COMPLETED if done else job.status.value,
                "arrival_s": s.arrival_s, "started_s": job.started_s, "finished_s": job.finished_s,
                "jct_s": job.finished_s - s.arrival_s if done else None,
                "queue_wait_s": (job.started_s if job.started_s is not None else horizon_s) - s.arrival_s,
                "work_left_gpu_h": job.work_left_gpu_h, "running_s": job.running_s, "migrating_s": job.migrating_s,
                "waiting_s": job.waiting_s,
                "migrations": job.n_migrations, "energy_kwh": job.energy_kwh, "renewable_kwh": job.renewable_kwh,
                "transfer_kwh": job.transfer_kwh, "transfer_renewable_kwh": job.transfer_renewable_kwh,
                "compute_kwh": job.energy_kwh - job.transfer_kwh,
                "compute_renewable_kwh": job.renewable_kwh - job.transfer_renewable_kwh,
            })

    def cross_traffic(self, rows: list[dict]) -> None:
        """The cross-traffic generators' samples (emulated substrates; none: no cross_traffic table)."""
        self._xt = list(rows)

    def tables(self) -> dict[str, pd.DataFrame]:
        """The run's tables, every one with its ``policy`` column and typed columns (docs/outputs.md)."""
        extra = {"cross_traffic": pd.DataFrame(self._xt, columns=list(_XT_DTYPES))} if getattr(self, "_xt", None) else {}
        tables = {
            "timeseries": pd.DataFrame(self._steps),
            "migrations": pd.DataFrame(self._migrations, columns=MIGRATION_COLUMNS if not self._migrations else None),
            "decisions": pd.DataFrame(self._decisions, columns=_DECISION_COLUMNS if not self._decisions else None),
            "candidates": pd.DataFrame(self._candidates, columns=list(_CANDIDATE_DTYPES)),
            "candidate_scores": pd.DataFrame(self._scores, columns=list(_SCORE_DTYPES)),
            "jobs": pd.DataFrame(self._jobs),
            "power": pd.DataFrame(self._power, columns=_POWER_COLUMNS if not self._power else None),
            **extra,
        }
        dtypes = {"migrations": MIGRATION_DTYPES, "decisions": _DECISION_DTYPES, "candidates": _CANDIDATE_DTYPES,
                  "candidate_scores": _SCORE_DTYPES, "jobs": _JOB_DTYPES, "power": _POWER_DTYPES,
                  "cross_traffic": _XT_DTYPES}
        out = {name: with_policy(typed(df, dtypes.get(name, {})), self.policy, self.label)
               for name, df in tables.items()}
        if self.start is not None:
            out = {name: with_time(df, self.start) for name, df in out.items()}
            out["migrations"] = with_time(out["migrations"], self.start, offset="t_decision_s", name="time_decision")
        return out


# a job that ran to its end: the migrations' word for it too (the scheduler's Status.DONE)
JOB_COMPLETED = "completed"

_POWER_COLUMNS = [
    "t_s", "site", "job_id", "cap_requested_w", "cap_w", "cap_enforced_w", "throughput_frac_model",
    "throughput_frac_enforced", "gpu_draw_model_w", "gpu_power_w", "gpu_power_basis", "backend", "throttle",
    "detail",
]
_POWER_DTYPES = {c: "str" for c in ("site", "job_id", "gpu_power_basis", "backend", "throttle", "detail")}
_DECISION_COLUMNS = ["decision"] + [f.name for f in fields(DecisionRecord) if f.name != "candidates"]
_DECISION_DTYPES = {"decision": "int64", **dtypes_of(DecisionRecord)}
_CANDIDATE_DTYPES = {
    "decision": "int64", "rank": "int64", "t_s": "float64", "job_id": "str", "src": "str", "dst": "str",
    "bandwidth_gbps": "float64", "window_s": "float64", "total_s": "float64", "budget_s": "float64",
    "eq1_ok": "boolean", "eq2_ok": "boolean", "feasibility_class": "str", "chosen": "bool",
}
_SCORE_DTYPES = {"decision": "int64", "rank": "int64", "dst": "str", "score": "str", "value": "float64"}
_JOB_DTYPES = {"started_s": "float64", "finished_s": "float64", "jct_s": "float64", "final_site": "str"}

_XT_DTYPES = {"t_s": "float64", "src": "str", "dst": "str", "entry": "int64", "wall_s": "float64",
              "tcp_bytes": "int64", "udp_bytes": "int64", "flows": "int64", "flows_started": "int64"}

DECLARED_DTYPES: dict[str, dict[str, str]] = {
    "migrations": MIGRATION_DTYPES, "decisions": _DECISION_DTYPES, "candidates": _CANDIDATE_DTYPES,
    "candidate_scores": _SCORE_DTYPES, "jobs": _JOB_DTYPES, "power": _POWER_DTYPES, "cross_traffic": _XT_DTYPES,
}
"""Per table of a migration run: the dtype this recorder gives each column it declares (all of
``migrations``, ``decisions``, ``candidates`` and ``candidate_scores``; the typed ones of ``jobs`` and
``power``). docs/outputs.md takes these columns' dtypes from here (testbed.studies.outputs_doc)."""
COMPLETE_TABLES = ("migrations", "decisions", "candidates", "candidate_scores")
"""The tables every column of which :data:`DECLARED_DTYPES` declares (besides ``policy``, ``label`` and
the UTC ``time*`` columns that every table gets)."""
