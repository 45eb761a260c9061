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

PowerTrip then picks the ``k`` that maximises ``eta_k = gain(k) / tau_k`` (``tau_k``: the projected
round time of the top-``k`` sites). Every round logs the projected gain of the chosen ``k`` next to
the measured one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


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
