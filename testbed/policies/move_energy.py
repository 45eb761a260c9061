"""Eq. 2 as a move's energy balance: the grid energy the move saves against the energy it costs.

A job on grid power at ``src`` that moves to ``dst`` runs there on renewables for
``T = min(W_dst, T_rem)``: ``W_dst`` the window ``dst`` can give this job (its share, after the
jobs already there or moving there: :meth:`ClusterView.window_forecast_s`) and ``T_rem`` its
remaining run time at ``dst``'s speed. Over ``T`` it would otherwise have drawn, at ``src``,
``P_src`` (its node's power at the GPU cap ``src``'s budget buys it) of which renewables covered
``R_src``: what is left of ``src``'s renewable power after the other jobs there, at most ``P_src``
(the jobs that started first are covered first). So

    saved_kw = P_src - R_src,   R_src = min(P_src, max(0, renewable_src - (n_src - 1) x P_src))
    gain_kwh = saved_kw x T / 3600

and the move pays off (Eq. 2) iff ``gain_kwh > E_cost = P_sys x T_transfer``: the paper's
``T_breakeven = E_cost / P_node < T`` with ``P_node`` replaced by the power the move really saves.
"""

from __future__ import annotations

from dataclasses import dataclass

from testbed.controller.policy_api import ClusterView, JobView


@dataclass(frozen=True)
class MoveEnergy:
    """One candidate move's Eq. 2 balance (kW, s, kWh)."""

    src_power_kw: float       # P_src: the job's power at its cap at the source
    src_renewable_kw: float   # R_src: the renewable power it gets there anyway
    window_s: float           # W_dst: the destination's window for this job (forecast)
    run_s: float              # T = min(W_dst, T_rem)
    cost_kwh: float           # E_cost = P_sys x T_transfer

    @property
    def saved_kw(self) -> float:
        return max(0.0, self.src_power_kw - self.src_renewable_kw)

    @property
    def gain_kwh(self) -> float:
        return self.saved_kw * self.run_s / 3600.0

    def pays_off(self, margin: float = 0.0) -> bool:
        """Eq. 2: the move saves more than ``(1 + margin)`` x what it costs."""
        return self.gain_kwh > (1.0 + margin) * self.cost_kwh

    def scores(self) -> tuple[tuple[str, float], ...]:
        return (("gain_kwh", round(self.gain_kwh, 6)), ("cost_kwh", round(self.cost_kwh, 6)))


def move_energy(view: ClusterView, job: JobView, dst: str, *, cost_kwh: float, src_topup_kw: float | None,
                window_s: float | None = None) -> MoveEnergy:
    """The Eq. 2 balance of moving ``job`` from its site to ``dst`` now; ``src_topup_kw`` is the grid
    power the policy lets the source draw (None: unlimited), ``window_s`` the destination's window
    for this job if the caller already has it."""
    src = job.site
    p_src = view.job_power_kw(src, src_topup_kw)
    others_kw = (view.jobs_after_moves(src) - 1) * p_src
    r_src = min(p_src, max(0.0, view.renewable_kw(src) - others_kw))
    w = view.window_forecast_s(dst) if window_s is None else window_s
    run_s = min(w, job.work_left_gpu_h / view.speed(dst) * 3600.0)
    return MoveEnergy(p_src, r_src, w, max(0.0, run_s), cost_kwh)
