"""``powertrip``: rank sites by the power-to-cost score (:mod:`testbed.federated.score`), then pick
how many of the top ones join with a greedy window over ``k`` (PowerTrip's Algorithm 1).

Every ``interval`` rounds, for each candidate ``k`` in ``[k_cur - window, k_cur + window]`` (within
``[k_min, usable sites]``):

    tau_k = projected round time of the top-k sites (the policy's round-time model)
    eta_k = ProjectAccuracyGain(k) / tau_k          (:mod:`testbed.federated.projection`)

and ``k_cur`` becomes the ``k`` with the largest ``eta_k`` (ties: the smaller k). The first round
uses ``k_init`` (the high-score core). ``gain: measured`` replaces the projection by the last
measured gain for every ``k`` (the review's test: without a k-dependent projection the window can
only trade round time). ``gain: corrected`` fits the projection's form to the measured gains of the
last rounds (:class:`testbed.federated.projection.CorrectedGain`); each candidate then carries both
the formula's gain (``formula_gain``) and the corrected one (``gain``).

``patience`` (PowerTrip's patience parameter): while the model keeps improving, k is held; the window
search runs (at an ``interval`` boundary) only once ``patience`` rounds in a row have passed without
a new best accuracy, and the count restarts after every change of k. ``patience: 0`` (the default)
re-evaluates at every interval boundary.

Its registry entry (the scenario model, naming this class): :class:`testbed.spec.federated.PowerTrip`.
"""

from __future__ import annotations

from testbed.federated.policies.base import Selection, SelectionPolicy
from testbed.federated.projection import CorrectedGain, GainModel
from testbed.federated.score import ranked
from testbed.federated.view import RoundView


class PowerTripPolicy(SelectionPolicy):
    def __init__(self, label: str, spec) -> None:
        super().__init__(label, spec)
        self.k_cur = spec.k_init
        self.gain = GainModel(h=spec.h_prior, ewma=spec.h_ewma, ceiling=spec.acc_ceiling, bounds=tuple(spec.h_bounds))
        self.corrected = CorrectedGain(window=spec.correction_window, ceiling=spec.acc_ceiling)
        self.last_measured: float | None = None
        self.best_acc = -1.0
        self.stale_rounds = 0        # rounds in a row without a new best accuracy

    def _candidate(self, view: RoundView, order: list[str], k: int) -> dict:
        tau = view.round_s(order[:k])
        formula = self.gain.project(view.accuracy, k)
        gain = formula
        if self.spec.gain == "measured" and self.last_measured is not None:
            gain = max(self.last_measured, 1e-6)
        elif self.spec.gain == "corrected":
            fitted = self.corrected.project(view.accuracy, k)
            gain = formula if fitted is None else fitted
        return {"k": k, "gain": gain, "formula_gain": formula, "tau_s": tau, "eta": gain / tau if tau > 0 else 0.0}

    def select(self, view: RoundView) -> Selection:
        order = ranked(view, self.spec.weight_ref_gb)
        if not order:
            return Selection([], note="no usable site")
        n = len(order)
        cands: list[dict] = []
        waiting = self.stale_rounds < self.spec.patience
        if view.round == 1 or (view.round - 1) % self.spec.interval or waiting:
            cands.append(self._candidate(view, order, max(1, min(self.k_cur, n))))
        else:
            lo = max(self.spec.k_min, self.k_cur - self.spec.window, 1)
            hi = min(n, self.k_cur + self.spec.window)
            lo = min(lo, hi)
            cands.extend(self._candidate(view, order, k) for k in range(lo, hi + 1))
        best = max(cands, key=lambda c: (c["eta"], -c["k"]))
        if best["k"] != self.k_cur:
            self.stale_rounds = 0
        self.k_cur = best["k"]
        return Selection(order[: best["k"]], projected_gain=best["gain"], formula_gain=best["formula_gain"],
                         candidates=cands,
                         note=f"k={best['k']} eta={best['eta']:.3g}/s h={self.gain.h:.3g}")

    def observe(self, view: RoundView, selection: Selection, acc_before: float, acc_after: float) -> None:
        if selection.sites:
            self.gain.update(acc_before, acc_after, len(selection.sites))
            self.corrected.observe(acc_before, acc_after, len(selection.sites))
            self.last_measured = acc_after - acc_before
        if acc_after > self.best_acc:
            self.best_acc = acc_after
            self.stale_rounds = 0
        else:
            self.stale_rounds += 1
