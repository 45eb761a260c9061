"""The policy contract: place arriving jobs, and propose migrations at each decision point.

A policy sees a :class:`~testbed.controller.view.ClusterView` (forecasts, not the truth) and
returns its choices with a :class:`~testbed.controller.records.DecisionRecord` for each, so
every decision can be audited: inputs, predicted times, chosen site or why none.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from testbed.controller.records import DecisionRecord, Prediction
from testbed.controller.view import ClusterView, JobView
from testbed.spec.scenario import Scenario
from testbed.workload import JobSpec


@dataclass(frozen=True)
class Move:
    job_id: str
    src: str
    dst: str
    reason: str
    prediction: Prediction | None = None  # None: the controller records the scenario's reference model


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
    def place(self, job: JobSpec, view: ClusterView) -> tuple[str, DecisionRecord]:
        """Choose the site an arriving job is queued at."""

    @abstractmethod
    def decide(self, view: ClusterView) -> tuple[list[Move], list[DecisionRecord]]:
        """Propose migrations now. Call ``view.plan_move`` for each so later choices see it."""

    def record(self, view: ClusterView, kind: str, job_id: str, src: str | None, dst: str | None, reason: str,
               candidates: list[dict] | None = None, n_feasible: int = 0) -> DecisionRecord:
        cands = candidates or []
        return DecisionRecord(view.now_s, self.label, kind, job_id, src, dst, reason, len(cands), n_feasible, cands)


def grid_jobs_by_remaining(view: ClusterView, site: str) -> list[JobView]:
    """Jobs running on grid power at a site, the most remaining work first (most to gain)."""
    return sorted(view.jobs_on_grid(site), key=lambda j: (-j.remaining_s, j.id))
