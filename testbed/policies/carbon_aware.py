"""Carbon-aware orchestration: feasibility_aware, then the grid's carbon intensity and price.

1. Renewable moves and placement are feasibility_aware's (Eq. 1, Eq. 2, utility), since power a
   site's renewables cover emits nothing.
2. A job that stays on grid power may move to a *lower-carbon grid*: a destination with a free
   node whose mean carbon intensity over ``T = min(lookahead_h, the job's remaining run time)``
   is at least ``min_carbon_reduction_frac`` below the source's, when

       saved_kg = P_job x T x (CI_src - CI_dst) / 1000
       cost_kg  = E_cost x (CI_src + CI_dst) / 2 / 1000        (E_cost = P_sys x T_transfer, Eq. 2)
       saved_kg > (1 + carbon_margin) x cost_kg    and    T_transfer + T_load + T_downtime < alpha x T

   (the carbon analogue of Eq. 2, and Eq. 1 with the run time at the destination as the window).
   The destination with the largest ``saved_kg - cost_kg`` wins. Damping applies (minimum dwell;
   a move back to the site the job last left must save ``(1 + return_margin)`` x its CO2 cost).
3. An arriving job no renewable-powered site can take is queued at the free site whose grid has
   the lowest mean intensity over ``lookahead_h`` (instead of its origin).
4. With ``max_price_per_kwh`` (and ``traces.price``), a site gets no grid top-up while its price is
   above it: its jobs run on renewables and battery alone (capped, or waiting) until it drops.

Its registry entry (the scenario model, naming this class): :class:`testbed.spec.carbon_policy.CarbonAware`.
"""

from __future__ import annotations

from testbed.controller.policy_api import CARBON, Candidate, Move
from testbed.feasibility import FeasibilityParams, energy_cost_kwh, migration_total_s, transfer_time_s
from testbed.policies.feasibility_aware import FeasibilityAwarePolicy
from testbed.policies.placement import grid_jobs_by_remaining


class CarbonAwarePolicy(FeasibilityAwarePolicy):
    name = "carbon_aware"

    def grid_topup_kw(self, view, site):
        price = view.price_per_kwh(site) if self.spec.max_price_per_kwh is not None else None
        if price is not None and price > self.spec.max_price_per_kwh:
            return 0.0
        return super().grid_topup_kw(view, site)

    def _lookahead_s(self) -> float:
        return self.spec.lookahead_h * 3600.0

    def place(self, job, view):
        site, rec = super().place(job, view)
        free = [s for s in view.sites if view.free_nodes(s) > 0]
        if view.surplus_kw(site) >= view.p_active_kw(site) and site in free:
            return site, rec  # a renewable-powered site
        known = [s for s in free if view.carbon_g_per_kwh(s, self._lookahead_s()) is not None]
        if not known:
            return site, rec
        best = min(known, key=lambda s: (view.carbon_g_per_kwh(s, self._lookahead_s()), view.sites.index(s)))
        ci = view.carbon_g_per_kwh(best, self._lookahead_s())
        why = f"no free site with renewable surplus; lowest grid carbon over {self.spec.lookahead_h:g} h ({ci:.0f} g/kWh)"
        return best, self.record(view, "place", job.id, None, best, why)

    def _grid_candidates(self, view, job, src: str) -> list[Candidate]:
        out = []
        for dst in view.sites:
            bw = view.bandwidth_forecast_gbps(src, dst) if dst != src else None
            if bw is None or view.free_nodes(dst) < 1:
                continue
            run_s = min(self._lookahead_s(), job.work_left_gpu_h / view.speed(dst) * 3600.0)
            ci_src, ci_dst = view.carbon_g_per_kwh(src, run_s), view.carbon_g_per_kwh(dst, run_s)
            if ci_src is None or ci_dst is None or run_s <= 0:
                continue
            params = FeasibilityParams.from_model(self.model, rtt_ms=view.rtt_ms(src, dst),
                                                  p_sys_kw=self.scenario.power.p_sys_kw, p_node_kw=view.p_active_kw(dst))
            xfer_s = transfer_time_s(job.checkpoint_gb, bw, params.corrections)
            total_s = migration_total_s(job.checkpoint_gb, bw, params)
            cost_kg = energy_cost_kwh(params.p_sys_kw, xfer_s) * (ci_src + ci_dst) / 2.0 / 1000.0
            p_job_kw = view.job_power_kw(dst, self.grid_topup_kw(view, dst), extra_jobs=1)
            saved_kg = p_job_kw * run_s / 3600.0 * (ci_src - ci_dst) / 1000.0
            margin = self.spec.carbon_margin + (self.return_margin if self.is_return(job, dst) else 0.0)
            reduction_ok = ci_dst <= (1.0 - self.spec.min_carbon_reduction_frac) * ci_src
            time_ok = total_s < params.alpha * run_s
            co2_ok = reduction_ok and saved_kg > (1.0 + margin) * cost_kg
            scores = (("ci_src_g_per_kwh", round(ci_src, 3)), ("ci_dst_g_per_kwh", round(ci_dst, 3)),
                      ("saved_co2_kg", round(saved_kg, 6)), ("cost_co2_kg", round(cost_kg, 6)),
                      ("total_s", round(total_s, 3)), ("budget_s", round(params.alpha * run_s, 3)))
            out.append(Candidate(dst, eq1_ok=time_ok, eq2_ok=co2_ok, scores=scores))
        return out

    def decide(self, view):
        moves, records = super().decide(view)
        moved = {m.job_id for m in moves}
        out_records = []
        for rec in records:
            if rec.kind != "stay" or rec.job_id in moved or rec.src is None or rec.reason.startswith("on grid; moved"):
                out_records.append(rec)  # a move, or held by the minimum dwell
                continue
            job = next((j for j in grid_jobs_by_remaining(view, rec.src) if j.id == rec.job_id), None)
            cands = self._grid_candidates(view, job, rec.src) if job is not None else []
            passing = [c for c in cands if c.passes_filter]
            if not passing:
                out_records.append(rec)
                continue
            best = max(passing, key=lambda c: (c.score("saved_co2_kg") - c.score("cost_co2_kg"), -view.sites.index(c.dst)))
            why = (f"on grid at {rec.src} ({best.score('ci_src_g_per_kwh'):.0f} g/kWh); {best.dst}'s grid "
                   f"({best.score('ci_dst_g_per_kwh'):.0f} g/kWh) saves {best.score('saved_co2_kg'):.3f} kg CO2 "
                   f"over {best.score('cost_co2_kg'):.3f} kg for the move")
            view.plan_move(job.id, rec.src, best.dst)
            moves.append(Move(job.id, rec.src, best.dst, why, trigger=CARBON))  # no window: no Eq. 1 budget
            out_records.append(self.record(view, "migrate", job.id, rec.src, best.dst, why, cands, len(passing)))
        return moves, out_records
