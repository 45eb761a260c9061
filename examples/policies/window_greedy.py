"""An example migration policy, plugged in by class (no testbed file changes):

    policies:
      - class: "examples/policies/window_greedy.py:WindowGreedy"   # or examples.policies.window_greedy:WindowGreedy
        max_transfer_frac: 0.2
        min_remaining_h: 0.5

It places an arriving job at its origin when the origin's renewables can power one more node,
else at the free site with the longest forecast renewable window. Every step, each job that runs
on grid power moves to the free site with the longest forecast window, if its checkpoint's
naive transfer time (size / forecast bandwidth + one RTT) is at most ``max_transfer_frac`` of
that window and it has at least ``min_remaining_h`` of work left. It uses only the policy API
(``ClusterView``) and its own transfer estimate, not the testbed's feasibility model; the run
still records the reference model's prediction beside the measured transfer for every move.
"""

from __future__ import annotations

from pydantic import Field

from testbed.controller.policy_api import Candidate, ClusterView, DecisionRecord, Move, Policy
from testbed.policies import PolicyParams


class WindowGreedy(Policy):
    name = "window_greedy"  # the default label (output folder)

    class Params(PolicyParams):
        max_transfer_frac: float = Field(0.2, gt=0, le=1, description="Transfer time / destination window, at most.")
        min_remaining_h: float = Field(0.5, ge=0, description="Jobs with less work left (hours at their site) stay.")

    def __init__(self, label, scenario, spec):
        super().__init__(label, scenario)
        self.max_transfer_frac = spec.max_transfer_frac
        self.min_remaining_s = spec.min_remaining_h * 3600.0

    # -- helpers -----------------------------------------------------------------------------
    def transfer_s(self, view: ClusterView, gb: float, src: str, dst: str) -> float | None:
        """Naive transfer time: size over the forecast bandwidth plus one round trip (None: no link)."""
        bw = view.bandwidth_forecast_gbps(src, dst)
        if bw is None or bw <= 0:
            return None
        return gb * 8.0 / bw + view.rtt_ms(src, dst) / 1000.0

    def powered(self, view: ClusterView, site: str) -> bool:
        return view.free_nodes(site) > 0 and view.window_forecast_s(site) > 0

    # -- the policy API ----------------------------------------------------------------------
    def place(self, job, view: ClusterView) -> tuple[str, DecisionRecord]:
        if self.powered(view, job.origin):
            return job.origin, self.record(view, "place", job.id, None, job.origin, "origin has renewables for one more")
        free = [s for s in view.sites if view.free_nodes(s) > 0] or view.sites
        site = max(free, key=lambda s: (view.window_forecast_s(s), -view.sites.index(s)))
        cands = [Candidate(s, scores=(("window_s", round(view.window_forecast_s(s), 3)),)) for s in free]
        return site, self.record(view, "place", job.id, None, site, "longest forecast window", cands)

    def decide(self, view: ClusterView) -> tuple[list[Move], list[DecisionRecord]]:
        moves: list[Move] = []
        records: list[DecisionRecord] = []
        for src in view.sites:
            for job in view.jobs_on_grid(src):
                if job.remaining_s < self.min_remaining_s:
                    records.append(self.record(view, "stay", job.id, src, None, "little work left"))
                    continue
                cands, ok = [], []
                for dst in view.sites:
                    if dst == src or not self.powered(view, dst):
                        continue
                    t = self.transfer_s(view, job.checkpoint_gb, src, dst)
                    if t is None:
                        continue
                    window = view.window_forecast_s(dst)
                    fits = t <= self.max_transfer_frac * window
                    cands.append(Candidate(dst, eq1_ok=fits, eq2_ok=True,
                                           scores=(("transfer_s", round(t, 3)), ("window_s", round(window, 3)))))
                    if fits:
                        ok.append((window, -view.sites.index(dst), dst))
                if not ok:
                    records.append(self.record(view, "stay", job.id, src, None, "no powered site within the transfer budget", cands))
                    continue
                dst = max(ok)[2]
                reason = f"on grid at {src}; longest window at {dst} within {self.max_transfer_frac:g} x window"
                view.plan_move(job.id, src, dst)
                moves.append(Move(job.id, src, dst, reason))
                records.append(self.record(view, "migrate", job.id, src, dst, reason, cands, len(ok)))
        return moves, records
