"""What a migration policy sees and returns: the controller's whole policy-facing API.

A policy gets a :class:`ClusterView` (forecasts, not the truth), places arriving jobs and
proposes :class:`Move` s, and returns a :class:`DecisionRecord` for each choice with the
:class:`Candidate` s it weighed, so that every decision can be audited: inputs, predicted
times, chosen site or why none. Policies import this module; it imports nothing of them.

Current renewable power at a site is an observation (a meter reading), so it is the true
value *now*; how long it lasts (the window) and the bandwidth a transfer will get are
forecasts. Moves a policy plans in this round are reflected at once (free nodes, loads).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

from testbed.controller.cluster import Cluster, Status
from testbed.controller.records import CARBON, PRICE, TRIGGERS, WINDOW  # noqa: F401 (Move.trigger's values)
from testbed.feasibility import Prediction
from testbed.inputs import Inputs
from testbed.spec.scenario import Scenario
from testbed.link import rtt_ms as round_trip_ms
from testbed.workload import JobSubmission


# ---------------------------------------------------------------------------- what a policy sees


@dataclass(frozen=True)
class JobView:
    """What a policy sees of one job: a read-only snapshot of the controller's runtime ``cluster.ClusterJob``."""

    id: str
    family: str
    site: str
    checkpoint_gb: float
    work_left_gpu_h: float
    remaining_s: float  # at the current site's speed
    origin: str
    arrival_s: float
    work_gpu_h: float
    moves: int = 0                   # migrations begun so far (completed or not)
    at_site_since_s: float = 0.0     # when it last started or resumed running at ``site``
    prev_site: str | None = None     # the site its last completed migration left

    def dwell_s(self, now_s: float) -> float | None:
        """Seconds it has run at ``site`` since its last move; None if it never moved."""
        return now_s - self.at_site_since_s if self.moves > 0 else None


def share_window_s(inputs: Inputs, site: str, t_s: float, jobs_ahead: int, *, forecast: bool) -> float:
    """The window ``site`` can give one more job at ``t_s``: seconds until its renewable power
    drops below ``(jobs_ahead + 1) x`` one node's active power, ``jobs_ahead`` being the jobs
    already there or moving there (they are covered first). 0 if it cannot power one more now.

    ``forecast``: the controller's view. The site's window forecast carries one error draw per
    window (``forecast = truth x exp(e)``); the same factor applies to every share of that window.
    Else the truth (what the run records the migration against)."""
    one_node_kw = inputs.windows.threshold_kw(site)
    true_s = inputs.renewable_kw[site].remaining_above(t_s, (max(0, jobs_ahead) + 1) * one_node_kw)
    if not forecast or true_s <= 0:
        return true_s
    # true_s > 0: the one-node window is open too (its threshold is lower) and at least as long
    return true_s * inputs.windows.forecast_remaining_s(site, t_s) / inputs.windows.true_remaining_s(site, t_s)


class ClusterView:
    def __init__(self, now_s: float, cluster: Cluster, inputs: Inputs, bandwidth=None):
        """``bandwidth``: the run's :class:`~testbed.crosstraffic.predict.BandwidthEstimator` (the
        policy's ``bandwidth_basis``); None: the forecast (nominal)."""
        self.now_s = now_s
        self._c = cluster
        self._in = inputs
        self._bandwidth = bandwidth
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
        """Forecast window ``site`` can give one more job (T_energy of Eq. 1): how long its renewable
        power keeps covering the jobs there or moving there (this round's moves included) plus
        one more node (:func:`share_window_s`). 0: it cannot power one more job now."""
        return share_window_s(self._in, site, self.now_s, self.jobs_after_moves(site), forecast=True)

    def job_power_kw(self, site: str, grid_topup_kw: float | None, extra_jobs: int = 0) -> float:
        """Wall power of one running node at ``site`` at the GPU cap the site's budget buys it: the
        renewable power now plus ``grid_topup_kw`` (None: unlimited) shared evenly by its jobs after
        this round's moves plus ``extra_jobs`` (the trace-to-cap rule, transfers and idle nodes aside)."""
        node = self._c.sites[site].power
        n = self.jobs_after_moves(site) + extra_jobs
        if grid_topup_kw is None or n <= 0:
            return node.active_kw(node.max_cap_w)
        budget_kw = (max(0.0, self.renewable_kw(site)) + grid_topup_kw) / n
        return node.active_kw(node.clamp_w(node.cap_for_budget_kw(budget_kw)))

    # -- grid signals (traces.carbon, traces.price) and batteries: None where the scenario has none --
    def _signal(self, traces: dict, site: str, horizon_s: float) -> float | None:
        tr = traces.get(site)
        if tr is None:
            return None
        if horizon_s <= 0:
            return tr.at(self.now_s)
        return self._in.grid.step_mean(traces, site, self.now_s, self.now_s + horizon_s)

    def carbon_g_per_kwh(self, site: str, horizon_s: float = 0.0) -> float | None:
        """Carbon intensity of ``site``'s grid power, gCO2/kWh: now (``horizon_s`` 0), or its mean over
        the next ``horizon_s`` (published day-ahead signals: the trace itself, no forecast error)."""
        return self._signal(self._in.grid.carbon_g_per_kwh, site, horizon_s)

    def price_per_kwh(self, site: str, horizon_s: float = 0.0) -> float | None:
        """Price of ``site``'s grid power in :attr:`currency` per kWh: now, or its mean over the next ``horizon_s``."""
        return self._signal(self._in.grid.price_per_kwh, site, horizon_s)

    @property
    def currency(self) -> str | None:
        return self._in.grid.currency

    def battery_soc_kwh(self, site: str) -> float | None:
        """Energy stored in ``site``'s battery now (None: no battery)."""
        b = self._c.sites[site].battery
        return None if b is None else b.soc_kwh

    def has_link(self, src: str, dst: str) -> bool:
        """A link joins src and dst (asking costs nothing: :meth:`bandwidth_forecast_gbps` may probe)."""
        return (src, dst) in self._in.latency_ms

    def bandwidth_forecast_gbps(self, src: str, dst: str) -> float | None:
        """The bandwidth a move src -> dst may count on now, on the policy's ``bandwidth_basis``
        (nominal: the link's forecast; fair_share: under the declared cross-traffic; probe: measured
        over the path). None: no link."""
        if (src, dst) not in self._in.latency_ms:
            return None
        if self._bandwidth is not None:
            return self._bandwidth.gbps(src, dst, self.now_s)
        return self._in.bandwidth.forecast_gbps(src, dst, self.now_s)

    def rtt_ms(self, src: str, dst: str) -> float:
        return round_trip_ms(self._in.latency_ms[(src, dst)])

    # -- jobs ------------------------------------------------------------------------------
    def _job_view(self, job_id: str) -> JobView:
        j = self._c.jobs[job_id]
        speed = self.speed(j.site)
        return JobView(
            j.submission.id, j.submission.family, j.site, j.submission.checkpoint_gb, j.work_left_gpu_h,
            j.work_left_gpu_h / speed * 3600.0, j.submission.origin, j.submission.arrival_s, j.submission.work_gpu_h,
            j.n_migrations, j.run_since_s, j.prev_site,
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


# ---------------------------------------------------------------------------- what a policy returns


@dataclass(frozen=True)
class Candidate:
    """One destination a policy weighed for one job.

    ``prediction``: the feasibility model's, from the forecasts (None: the policy uses no model).
    ``eq1_ok``: the Eq. 1 verdict the policy filters on (``prediction.feasible``: the risk
    budget's when the policy has one); ``eq2_ok``: the move's energy breaks even in time.
    ``scores``: the policy's own ranking numbers by name (units in the names), as recorded."""

    dst: str
    prediction: Prediction | None = None
    eq1_ok: bool | None = None
    eq2_ok: bool | None = None
    scores: tuple[tuple[str, float], ...] = ()

    @property
    def passes_filter(self) -> bool:
        return bool(self.eq1_ok) and bool(self.eq2_ok)

    def score(self, name: str) -> float:
        for key, value in self.scores:
            if key == name:
                return value
        raise KeyError(f"candidate {self.dst}: no score {name!r}")

    def row(self) -> dict:
        """The candidate as ``decisions.parquet`` shows it: the prediction's inputs and its
        deterministic Eq. 1 terms (rounded), the verdicts, then the scores."""
        out: dict = {"dst": self.dst}
        p = self.prediction
        if p is not None:
            out.update(bandwidth_gbps=round(p.bandwidth_gbps, 6), window_s=round(p.window_s, 3),
                       total_s=round(p.total_s, 3), budget_s=round(p.nominal_budget_s, 3))
        if self.eq1_ok is not None:
            out["eq1_ok"] = bool(self.eq1_ok)
        if self.eq2_ok is not None:
            out["eq2_ok"] = bool(self.eq2_ok)
        if p is not None:
            out["class"] = p.nominal_class
        out.update(self.scores)
        return out


@dataclass(frozen=True)
class Move:
    job_id: str
    src: str
    dst: str
    reason: str
    prediction: Prediction | None = None  # None: the controller records the scenario's reference model
    trigger: str = WINDOW  # WINDOW, or CARBON / PRICE for a move made on a grid signal (no window budget)

    def __post_init__(self):
        if self.trigger not in TRIGGERS:
            raise ValueError(f"move of {self.job_id}: trigger must be one of {TRIGGERS}, got {self.trigger!r}")


@dataclass(frozen=True)
class DecisionRecord:
    """One evaluation by a policy: inputs, predicted times per candidate, choice and reason."""

    t_s: float
    policy: str
    kind: str  # place | migrate | stay
    job_id: str
    src: str | None
    dst: str | None
    reason: str
    n_candidates: int = 0
    n_feasible: int = 0
    candidates: tuple[Candidate, ...] = ()

    def row(self) -> dict:
        """One row of ``decisions.parquet`` (its candidates are rows of ``candidates.parquet``, see
        :class:`testbed.controller.run_log.RunLog`)."""
        return {
            "t_s": self.t_s, "policy": self.policy, "kind": self.kind, "job_id": self.job_id, "src": self.src,
            "dst": self.dst, "reason": self.reason, "n_candidates": self.n_candidates, "n_feasible": self.n_feasible,
        }


# ---------------------------------------------------------------------------- the policy contract


class Policy(ABC):
    name: str = "abstract"

    def __init__(self, label: str, scenario: Scenario, topup_kw: float | None = None):
        self.label = label
        self.scenario = scenario
        self.topup_kw = topup_kw

    def grid_topup_kw(self, view: ClusterView, site: str) -> float | None:
        """Grid power ``site`` may draw beyond its renewables during the coming step (None: no limit).

        The trace-to-cap path turns renewables + this top-up into the site's GPU caps. Default:
        the policy's ``grid_topup_kw`` setting, never more than the site's grid limit."""
        limit = view.grid_limit_kw(site)
        if self.topup_kw is None:
            return limit
        return self.topup_kw if limit is None else min(limit, self.topup_kw)

    @abstractmethod
    def place(self, job: JobSubmission, view: ClusterView) -> tuple[str, DecisionRecord]:
        """Choose the site an arriving job is queued at."""

    @abstractmethod
    def decide(self, view: ClusterView) -> tuple[list[Move], list[DecisionRecord]]:
        """Propose migrations now. Call ``view.plan_move`` for each so later choices see it."""

    def record(self, view: ClusterView, kind: str, job_id: str, src: str | None, dst: str | None, reason: str,
               candidates: Sequence[Candidate] = (), n_feasible: int = 0) -> DecisionRecord:
        cands = tuple(candidates)
        return DecisionRecord(view.now_s, self.label, kind, job_id, src, dst, reason, len(cands), n_feasible, cands)
