"""``ProjectAccuracyGain``: our explicit formula (the paper does not publish one).

Let ``a_t`` be the current test accuracy, ``A`` a ceiling (``acc_ceiling``, default 1), and ``k``
the number of sites of a candidate round. The projected gain of one round with ``k`` sites is

    gain(k) = (A - a_t) x (1 - (1 + k) ** (-h))

- the **remaining headroom** ``A - a_t`` shrinks as training converges (recent trend);
- ``1 - (1 + k)^(-h)`` is the fraction of the remaining error one round closes: it grows with
  ``k`` with **logarithmic diminishing returns** (``-ln(1 - fraction) = h ln(1 + k)``);
- ``h`` (learning efficiency per log-site) is **calibrated from the measured rounds**: after a
  round with ``k_r`` sites that moved the accuracy from ``a_{r-1}`` to ``a_r``,

      h_r = ln((A - a_{r-1}) / (A - a_r)) / ln(1 + k_r)

  clipped to ``[h_min, h_max]`` (a round that lost accuracy gives ``h_min``), and
  ``h = (1 - lambda) h + lambda h_r`` (EWMA, ``lambda = h_ewma``), starting from ``h_prior``.
  This is where the paper's normalisation ``k / k_current`` lives: a gain measured with ``k_r``
  sites is converted to one per log-site before it is applied to another ``k``.

``gain: corrected`` (the review's proposal: a model calibrated on measured early-round gains)
keeps the same form but fits it to the measured rounds instead of assuming it. Each trained
round gives a point ``(ln(1 + k_r), y_r)`` with ``y_r = ln((A - a_{r-1}) / (A - a_r))``; over the
last ``correction_window`` rounds, least squares gives ``y = b + c ln(1 + k)`` (``c >= 0``: more
sites never close less error), and

    gain(k) = (A - a_t) x (1 - exp(-(b + c ln(1 + k))))

so both how much one round closes (``b``) and how that grows with ``k`` (``c``) come from the
measured gains. Until the window holds two distinct ``k``, the projection above is used. Every
round logs the formula's projection, the corrected one and the measured gain.

PowerTrip then picks the ``k`` that maximises ``eta_k = gain(k) / tau_k`` (``tau_k``: the projected
round time of the top-``k`` sites). Every round logs the projected gain of the chosen ``k`` next to
the measured one.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field


def project_gain(accuracy: float, k: int, h: float, ceiling: float = 1.0) -> float:
    if k < 1:
        return 0.0
    headroom = max(0.0, ceiling - accuracy)
    return headroom * (1.0 - (1.0 + k) ** (-h))


def measured_h(acc_before: float, acc_after: float, k: int, ceiling: float = 1.0,
               bounds: tuple[float, float] = (0.001, 2.0)) -> float:
    lo, hi = bounds
    before, after = ceiling - acc_before, ceiling - acc_after
    if k < 1 or before <= 0:
        return lo
    if after <= 0:
        return hi
    h = math.log(before / after) / math.log(1.0 + k)
    return min(hi, max(lo, h))


@dataclass
class GainModel:
    """Holds ``h`` between rounds (state of the PowerTrip policy)."""

    h: float = 0.1
    ewma: float = 0.5
    ceiling: float = 1.0
    bounds: tuple[float, float] = (0.001, 2.0)

    def project(self, accuracy: float, k: int) -> float:
        return project_gain(accuracy, k, self.h, self.ceiling)

    def update(self, acc_before: float, acc_after: float, k: int) -> float:
        h_r = measured_h(acc_before, acc_after, k, self.ceiling, self.bounds)
        self.h = (1.0 - self.ewma) * self.h + self.ewma * h_r
        return h_r


def closed_log_error(acc_before: float, acc_after: float, ceiling: float = 1.0, cap: float = 10.0) -> float | None:
    """``ln((A - a_before) / (A - a_after))``: the log of the remaining error one round closed
    (negative when accuracy fell), clipped to ``[-cap, cap]``; ``None`` without headroom before."""
    before, after = ceiling - acc_before, ceiling - acc_after
    if before <= 0:
        return None
    if after <= 0:
        return cap
    return max(-cap, min(cap, math.log(before / after)))


@dataclass
class CorrectedGain:
    """The gain projection fitted to the measured rounds: ``y = b + c ln(1 + k)`` by least squares
    over the last ``window`` trained rounds (``c`` clipped at 0, then ``b`` refitted)."""

    window: int = 10
    ceiling: float = 1.0
    points: deque = field(default_factory=deque)   # (ln(1 + k), y)

    def observe(self, acc_before: float, acc_after: float, k: int) -> None:
        y = closed_log_error(acc_before, acc_after, self.ceiling)
        if k >= 1 and y is not None:
            self.points.append((math.log1p(k), y))
            while len(self.points) > self.window:
                self.points.popleft()

    def fit(self) -> tuple[float, float] | None:
        """``(b, c)``, or ``None`` until the window holds two distinct ``k``."""
        xs = [x for x, _ in self.points]
        if len(set(xs)) < 2:
            return None
        n = len(xs)
        mx, my = sum(xs) / n, sum(y for _, y in self.points) / n
        sxx = sum((x - mx) ** 2 for x in xs)
        c = max(0.0, sum((x - mx) * (y - my) for x, y in self.points) / sxx)
        return my - c * mx, c

    def project(self, accuracy: float, k: int) -> float | None:
        """The fitted gain of a round with ``k`` sites from ``accuracy``; ``None`` before a fit."""
        fitted = self.fit()
        if fitted is None or k < 1:
            return None
        b, c = fitted
        headroom = max(0.0, self.ceiling - accuracy)
        return headroom * (1.0 - math.exp(-max(0.0, b + c * math.log1p(k))))
