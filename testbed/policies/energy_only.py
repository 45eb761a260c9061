"""Energy-only: follow renewable surplus, with no feasibility check (the migration paper's baseline).

Placement goes to the free site with the largest surplus. At each decision point every job
running on grid power moves to the free site with the largest surplus that can power it,
whatever the checkpoint size, bandwidth or remaining window. The shared damping
(:mod:`testbed.policies.damping`: minimum dwell, return margin) applies unless switched off.

Its registry entry (the scenario model, naming this class): :class:`testbed.spec.policies.EnergyOnly`.
"""

from __future__ import annotations

from testbed.controller.policy_api import Candidate, Move, Policy
from testbed.policies.damping import Damped
from testbed.policies.placement import greenest, grid_jobs_by_remaining


class EnergyOnlyPolicy(Damped, Policy):
    name = "energy_only"

    def __init__(self, label, scenario, spec):
        super().__init__(label, scenario)
        self.init_damping(spec)

    def place(self, job, view):
        site, why = greenest(job, view)
        return site, self.record(view, "place", job.id, None, site, why)

    def decide(self, view):
        moves, records = [], []
        for src in view.sites:
            for job in grid_jobs_by_remaining(view, src):
                held = self.held(view, job)
                if held:
                    records.append(self.record(view, "stay", job.id, src, None, held))
                    continue
                cands = [
                    d for d in view.sites
                    if d != src and view.has_link(src, d)
                    and view.free_nodes(d) > 0 and view.surplus_kw(d) >= view.p_active_kw(d)
                ]
                info = [Candidate(d, scores=(("surplus_kw", round(view.surplus_kw(d), 4)),)) for d in cands]
                back = [d for d in cands if self.is_return(job, d)
                        and not self.return_ok(job, d, self.reference_energy(view, job, d))]
                cands = [d for d in cands if d not in back]
                if not cands:
                    why = "on grid; no free site with renewable surplus"
                    if back:
                        why = f"on grid; a move back to {back[0]} would not save (1 + {self.return_margin:g}) x its cost"
                    records.append(self.record(view, "stay", job.id, src, None, why, info))
                    continue
                dst = max(cands, key=lambda d: (view.surplus_kw(d), -view.sites.index(d)))
                reason = f"on grid at {src}; largest surplus at {dst} ({view.surplus_kw(dst):.2f} kW)"
                view.plan_move(job.id, src, dst)
                moves.append(Move(job.id, src, dst, reason))
                records.append(self.record(view, "migrate", job.id, src, dst, reason, info, len(cands)))
        return moves, records
