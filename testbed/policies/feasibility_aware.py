"""Feasibility-aware orchestration (seed 2511.16182, Algorithm 1), with the risk budget.

For every job running on grid power, each destination that has a free node and renewable
surplus is a candidate. The hard filter keeps candidates that satisfy
  - Eq. 1 on the forecasts: T_transfer + T_load + T_downtime < alpha * T_window (forecast), or,
    with ``epsilon``, P(true window >= total / alpha) >= 1 - epsilon under the forecast-error
    model (``assumed_window_noise_pct``, default the scenario's forecast noise) and, with
    ``assumed_bandwidth_noise_pct``, a log-normal bandwidth error too (union bound: epsilon/2 each);
  - Eq. 2: the grid energy the move saves over ``min(window, remaining time)`` exceeds what the
    transfer costs (:mod:`testbed.policies.move_energy`: the power the move really saves, not P_node).
The window (T_energy) is the one the destination can give this job: its share of the renewable
power after the jobs already there or moving there (``ClusterView.window_forecast_s``).
Survivors are ranked by ``U(d) = gamma * R(d) - beta * L(d)`` with
  - ``R(d) = min(1, renewable_kw(d) / (load_kw(d) + P_node(d)))``: renewable availability, the
    share of d's power after the move that renewables cover now (0 for staying on grid). The
    window's *length* enters only through the filter, as in the paper, so that ``no_filter``
    differs from ``feasibility_aware`` by Eq. 1 alone;
  - ``L(d)``: the delay the job expects at d, hours = predicted migration time + the slowdown
    it would suffer once the forecast window ends and d runs on its grid limit alone:
    ``max(0, T_rem - W(d)) * (1 / s_grid(d) - 1)``, with ``s_grid`` the speed share a power-capped
    node gets (``grid_limit / (jobs x P_node)``, 1 with no limit). Queueing for a node is 0:
    only destinations with a free node are considered.
The job moves if the best U beats staying, ``U(src) = -beta * T_rem * (1 / s_grid(src) - 1)``,
by more than ``min_gain``.
``no_filter`` runs this same code with the filter off: the independent test of Eq. 1;
``feasibility_classes`` with the paper's fixed classes in place of Eq. 1. All three share the
damping of :mod:`testbed.policies.damping` (minimum dwell, return margin); ``feasibility_aware_paper``
is this code with the damping off (the paper's Algorithm 1). Placement
(:func:`~testbed.policies.placement.most_renewable_share`) is shared with ``placement_only``.

Its registry entry (the scenario model, naming this class): :class:`testbed.spec.policies.FeasibilityAware`.
"""

from __future__ import annotations

from testbed.controller.policy_api import Candidate, Move, Policy
from testbed.feasibility import FeasibilityParams, Prediction, assess
from testbed.policies.damping import Damped
from testbed.policies.move_energy import move_energy
from testbed.policies.placement import grid_jobs_by_remaining, most_renewable_share, renewable_share


class FeasibilityAwarePolicy(Damped, Policy):
    name = "feasibility_aware"
    use_filter = True

    def __init__(self, label, scenario, spec):
        super().__init__(label, scenario)
        self.init_damping(spec)
        self.spec = spec
        self.model = spec.feasibility_model(scenario.feasibility)  # its own parameters, else the scenario's
        noise_pct = spec.assumed_window_noise_pct
        if noise_pct is None:
            noise_pct = scenario.traces.forecast.window.noise_pct
        # the risk budget's forecast error model (none without a risk budget: Eq. 1 on the forecasts)
        self.window_noise_frac = noise_pct / 100.0 if spec.epsilon is not None else 0.0
        self.bandwidth_noise_frac = spec.assumed_bandwidth_noise_pct / 100.0

    def time_ok(self, pred: Prediction) -> bool:
        """The filter's time rule: Eq. 1 (the risk budget's verdict with ``epsilon``)."""
        return pred.feasible

    _availability = staticmethod(renewable_share)  # R(d)

    def place(self, job, view):
        site, why = most_renewable_share(job, view)
        return site, self.record(view, "place", job.id, None, site, why)

    def _candidates(self, view, job, src: str) -> list[Candidate]:
        out = []
        p_sys = self.scenario.power.p_sys_kw
        for dst in view.sites:
            if dst == src or not view.has_link(src, dst) or view.free_nodes(dst) < 1 \
                    or view.surplus_kw(dst) < view.p_active_kw(dst):
                continue
            window_s = view.window_forecast_s(dst)
            if window_s <= 0:
                continue
            bw = view.bandwidth_forecast_gbps(src, dst)  # last: with bandwidth_basis probe, a measurement
            params = FeasibilityParams.from_model(self.model, rtt_ms=view.rtt_ms(src, dst), p_sys_kw=p_sys,
                                                  p_node_kw=view.p_active_kw(dst))
            pred = assess(job.checkpoint_gb, bw, window_s, params, epsilon=self.spec.epsilon,
                          window_noise_frac=self.window_noise_frac, bandwidth_noise_frac=self.bandwidth_noise_frac)
            remaining_s = job.work_left_gpu_h / view.speed(dst) * 3600.0
            energy = move_energy(view, job, dst, cost_kwh=pred.e_cost_kwh, window_s=window_s,
                                 src_topup_kw=self.grid_topup_kw(view, src))
            r = self._availability(view, dst)
            slow_h = max(0.0, remaining_s - window_s) / 3600.0 * (1.0 / view.grid_only_speed(dst, 1) - 1.0)
            lag_h = pred.total_s / 3600.0 + slow_h
            scores = (("R", round(r, 6)), ("L_h", round(lag_h, 6)), ("U", self.spec.gamma * r - self.spec.beta * lag_h),
                      *energy.scores(), ("return_ok", float(self.return_ok(job, dst, energy))))
            out.append(Candidate(dst, pred, eq1_ok=self.time_ok(pred), eq2_ok=energy.pays_off(), scores=scores))
        return out

    def decide(self, view):
        moves, records = [], []
        for src in view.sites:
            for job in grid_jobs_by_remaining(view, src):
                held = self.held(view, job)
                if held:
                    records.append(self.record(view, "stay", job.id, src, None, held))
                    continue
                cands = self._candidates(view, job, src)
                passing = [c for c in cands if c.passes_filter]
                eligible = passing if self.use_filter else cands
                if not cands:
                    records.append(self.record(view, "stay", job.id, src, None, "on grid; no free site with renewable surplus"))
                    continue
                back = [c for c in eligible if not c.score("return_ok")]
                eligible = [c for c in eligible if c.score("return_ok")]
                if back and not eligible:
                    why = (f"a move back to {back[0].dst} saves {back[0].score('gain_kwh'):.3f} kWh, not "
                           f"(1 + {self.return_margin:g}) x its cost {back[0].score('cost_kwh'):.3f} kWh")
                    records.append(self.record(view, "stay", job.id, src, None, why, cands, len(passing)))
                    continue
                if not eligible:
                    worst = min((c.row() for c in cands), key=lambda row: row["budget_s"] - row["total_s"])  # as recorded
                    why = (f"all {len(cands)} candidate(s) fail the filter "
                           f"(e.g. {worst['dst']}: {worst['total_s']:.0f} s vs budget {worst['budget_s']:.0f} s)")
                    records.append(self.record(view, "stay", job.id, src, None, why, cands, 0))
                    continue
                best = max(eligible, key=lambda c: (c.score("U"), -view.sites.index(c.dst)))
                u_best = best.score("U")
                u_stay = -self.spec.beta * job.remaining_s / 3600.0 * (1.0 / view.grid_only_speed(src) - 1.0)
                if u_best - u_stay <= self.spec.min_gain:
                    why = (f"best utility {u_best:.3f} at {best.dst} does not beat staying "
                           f"({u_stay:.3f}) by {self.spec.min_gain}")
                    records.append(self.record(view, "stay", job.id, src, None, why, cands, len(passing)))
                    continue
                filt = "filter passed" if best.passes_filter else "filter OFF (Eq. 1 would reject)"
                why = (f"U={u_best:.3f} at {best.dst} (R={best.score('R'):.2f}, L={best.score('L_h') * 60:.1f} min); "
                       f"{filt}")
                view.plan_move(job.id, src, best.dst)
                moves.append(Move(job.id, src, best.dst, why, best.prediction))
                records.append(self.record(view, "migrate", job.id, src, best.dst, why, cands, len(passing)))
        return moves, records
