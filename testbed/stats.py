"""Small statistics the testbed's verdicts and calibrations rest on: Student-t intervals, paired
tests over seeds, and a weighted least-squares line with standard errors (scipy for the
distributions). It sits at the bottom of the import order: the report and `calibrate load` both use it."""

from __future__ import annotations

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


@dataclass(frozen=True)
class PairedTest:
    """Paired comparison of ``a`` against ``b`` over the same seeds: mean difference ``a - b``,
    the paired t-test's and the Wilcoxon signed-rank test's two-sided p-values (NaN when a test
    cannot be run: fewer than two pairs, or every difference zero)."""

    n: int
    mean_diff: float
    t_p: float
    wilcoxon_p: float


def paired_test(a, b) -> PairedTest | None:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    ok = np.isfinite(a) & np.isfinite(b)
    a, b = a[ok], b[ok]
    if not a.size:
        return None
    d = a - b
    t_p = w_p = float("nan")
    if d.size >= 2 and np.any(d != 0):
        if np.ptp(d) > 0:
            t_p = float(stats.ttest_rel(a, b).pvalue)
        else:  # every pair differs by the same amount: no spread, the difference is certain
            t_p = 0.0
        w_p = float(stats.wilcoxon(d).pvalue)
    return PairedTest(int(d.size), float(d.mean()), t_p, w_p)


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
