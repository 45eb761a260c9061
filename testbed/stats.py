"""Small statistics the testbed's verdicts and calibrations rest on: Student-t intervals, paired
tests over seeds, a paired bootstrap interval of a ratio of means, and a weighted least-squares line with standard errors (scipy for the
distributions). It sits at the bottom of the import order: the report and `calibrate load` both use it."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from scipy import stats


@dataclass(frozen=True)
class Interval:
    """Mean of ``n`` values and the two-sided ``level`` Student-t confidence interval of the mean
    (``lo == hi == mean`` for a single value: no spread is known, the interval is not meaningful)."""

    mean: float
    lo: float
    hi: float
    n: int
    level: float = 0.95

    def contains(self, x: float) -> bool:
        return self.n > 1 and self.lo <= x <= self.hi


def t_interval(values, level: float = 0.95) -> Interval | None:
    """The ``level`` t-interval of the mean of the finite ``values``; None if there is none."""
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    if not x.size:
        return None
    mean = float(x.mean())
    if x.size < 2:
        return Interval(mean, mean, mean, 1, level)
    half = float(stats.t.ppf(0.5 + level / 2.0, x.size - 1) * x.std(ddof=1) / np.sqrt(x.size))
    return Interval(mean, mean - half, mean + half, int(x.size), level)


RATIO_RESAMPLES = 9999
RATIO_SEED = 0  # a fixed stream: the same data give the same interval (reports are re-derived and compared)


def ratio_change_interval(a, b, level: float = 0.95) -> Interval | None:
    """The change of ``a``'s mean against ``b``'s over the same seeds, ``100 x (mean a / mean b - 1)``
    (%), with the ``level`` paired bootstrap (BCa, seeds resampled as pairs) interval: bounded below by
    -100 % as the quantity is, and defined where single seeds of ``b`` are 0. Over the pairs where both
    are finite; None where ``b``'s mean is not positive (no relative change) or nothing is left."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    ok = np.isfinite(a) & np.isfinite(b)
    a, b = a[ok], b[ok]
    if not a.size or not b.mean() > 0:
        return None

    def change(x, y, axis=-1):
        return 100.0 * (np.mean(x, axis=axis) / np.mean(y, axis=axis) - 1.0)

    mean = float(change(a, b))
    if a.size < 2:
        return Interval(mean, mean, mean, 1, level)
    if np.allclose(a * b.sum(), b * a.sum(), rtol=1e-9, atol=0.0):  # a proportional to b: one ratio, no spread
        return Interval(mean, mean, mean, int(a.size), level)
    def interval(method: str) -> tuple[float, float]:
        with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
            warnings.simplefilter("ignore")  # a resample whose b-mean is 0 gives inf: BCa is then undefined
            res = stats.bootstrap((a, b), change, paired=True, vectorized=True, confidence_level=level,
                                  n_resamples=RATIO_RESAMPLES, method=method,
                                  random_state=np.random.default_rng(RATIO_SEED))
        return float(res.confidence_interval.low), float(res.confidence_interval.high)

    lo, hi = interval("BCa")
    if not (math.isfinite(lo) and math.isfinite(hi)):  # BCa undefined: the percentile interval
        lo, hi = interval("percentile")
    return Interval(mean, lo, hi, int(a.size), level)


def mean_ci95(values) -> tuple[int, float, float, float]:
    """(n, mean, sample std, half-width of the Student-t 95 % CI of the mean) of the non-NaN ``values``:
    a sweep table's columns (``std`` and ``ci95`` NaN below two values, everything NaN for none)."""
    x = np.asarray(values, dtype=float)
    x = x[~np.isnan(x)]
    n = int(x.size)
    if n == 0:
        return 0, math.nan, math.nan, math.nan
    mean = float(np.mean(x))
    if n < 2:
        return n, mean, math.nan, math.nan
    std = float(np.std(x, ddof=1))
    return n, mean, std, float(stats.t.ppf(0.975, n - 1) * std / math.sqrt(n))


@dataclass(frozen=True)
class PairedTest:
    """Paired comparison of ``a`` against ``b`` over the same seeds (``paired_test``): ``n`` pairs,
    mean difference ``a - b`` and two two-sided p-values, never 0 for a finite sample:

    - ``t_p``: the paired Student t-test's p where the differences vary. Where they do not (every
      difference the same, to 1e-9 relative), the t statistic is undefined (0 spread) and ``t_p`` is
      the exact sign-flip (permutation) test's p of the mean difference instead: ``2 / 2**n`` for
      ``n`` equal nonzero differences (only the observed signs and their mirror are as extreme);
    - ``wilcoxon_p``: the Wilcoxon signed-rank test's p (zero differences dropped, tied ranks
      averaged): exact for up to ``EXACT_MAX_N`` nonzero differences (every one of the ``2**m`` sign
      flips of the ranks enumerated, ties included; scipy's ``method="exact"`` assumes no ties), and
      ``2 / 2**m`` for any ``m`` when all ``m`` have one sign (zero spread included); else
      ``scipy.stats.wilcoxon``'s default method above ``EXACT_MAX_N``.

    Both are NaN when there is nothing to test: fewer than two pairs, or every difference zero (no
    difference to test; a table shows "-"). A p below the smallest positive float is given as that
    float."""

    n: int
    mean_diff: float
    t_p: float
    wilcoxon_p: float


EXACT_MAX_N = 16  # up to 2**16 sign flips enumerated: exact, and fast
_TINY = float(np.finfo(float).tiny)


def _no_spread(d: np.ndarray) -> bool:
    return bool(np.allclose(d, d[0], rtol=1e-9, atol=0.0))


def _signed_rank_p(d: np.ndarray) -> float:
    """Two-sided p of the Wilcoxon signed-rank statistic of the differences ``d`` (zeros dropped)."""
    d = d[d != 0]
    m = d.size
    if m == 0:
        return 1.0
    if np.all(d > 0) or np.all(d < 0):  # only these signs and their mirror are as extreme (ties or not)
        return math.ldexp(2.0, -m)
    if m > EXACT_MAX_N:
        return float(stats.wilcoxon(d).pvalue)
    ranks = stats.rankdata(np.abs(d))
    centre = ranks.sum() / 2.0
    observed = abs(float(ranks[d > 0].sum()) - centre)
    w_plus = np.zeros(1)
    for r in ranks:  # W+ under every one of the 2**m assignments of signs to the ranks
        w_plus = np.concatenate([w_plus, w_plus + r])
    return float(np.mean(np.abs(w_plus - centre) >= observed - 1e-9))  # ranks are halves: exact sums


def paired_test(a, b) -> PairedTest | None:
    """The paired tests of ``a`` against ``b`` over the pairs where both are finite (PairedTest says
    what each p is); None when there is no such pair."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    ok = np.isfinite(a) & np.isfinite(b)
    a, b = a[ok], b[ok]
    if not a.size:
        return None
    d = a - b
    n = int(d.size)
    t_p = w_p = float("nan")
    if n >= 2 and np.any(d != 0):
        if _no_spread(d):
            t_p = math.ldexp(2.0, -n)  # exact sign-flip p 2 / 2**n: only the observed signs or all mirrored
        else:
            t_p = float(stats.ttest_rel(a, b).pvalue)
        w_p = _signed_rank_p(d)
        t_p, w_p = max(t_p, _TINY), max(w_p, _TINY)
    return PairedTest(n, float(d.mean()), t_p, w_p)


@dataclass(frozen=True)
class LineFit:
    """``y = slope x + intercept`` by weighted least squares, with standard errors, ``level``
    t-intervals (n - 2 degrees of freedom) and the weighted R²."""

    n: int
    slope: float
    intercept: float
    slope_se: float
    intercept_se: float
    slope_ci: tuple[float, float]
    intercept_ci: tuple[float, float]
    r2: float


def line_fit(x, y, weights=None, level: float = 0.95) -> LineFit:
    """Weighted least squares (weights ``w``: minimises ``sum w (y - a x - b)^2``; ordinary least
    squares without). Needs at least 3 points and two distinct ``x`` (ValueError otherwise)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    w = np.ones_like(x) if weights is None else np.asarray(weights, dtype=float)
    if x.size < 3 or np.ptp(x) <= 0:
        raise ValueError("a line needs at least 3 points at two or more distinct x")
    sw = np.sqrt(w)
    design = np.column_stack([x, np.ones_like(x)]) * sw[:, None]
    target = y * sw
    coef, *_ = np.linalg.lstsq(design, target, rcond=None)
    resid = target - design @ coef
    dof = x.size - 2
    sigma2 = float(resid @ resid) / dof
    cov = sigma2 * np.linalg.inv(design.T @ design)
    se = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    q = float(stats.t.ppf(0.5 + level / 2.0, dof))
    ybar = float(np.sum(w * y) / np.sum(w))
    ss_tot = float(np.sum(w * (y - ybar) ** 2))
    r2 = 1.0 - float(resid @ resid) / ss_tot if ss_tot > 0 else 1.0
    a, b = float(coef[0]), float(coef[1])
    return LineFit(int(x.size), a, b, float(se[0]), float(se[1]), (a - q * se[0], a + q * se[0]),
                   (b - q * se[1], b + q * se[1]), r2)
