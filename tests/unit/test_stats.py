"""testbed.stats.paired_test: the paired t-test where the differences vary, exact tests where they do
not, and never a p of 0 from a finite sample."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from testbed.stats import EXACT_MAX_N, paired_test


@pytest.mark.parametrize("n", [2, 3, 5, 10, 12, 20])
def test_equal_differences_get_the_exact_sign_flip_p_never_0(n):
    a, b = np.full(n, 7.5), np.full(n, 2.5)  # every pair differs by the same 5: no spread
    t = paired_test(a, b)
    assert t.n == n and t.mean_diff == 5.0
    assert t.t_p == pytest.approx(2.0 / 2**n, rel=1e-12) and t.t_p > 0
    assert t.wilcoxon_p == pytest.approx(2.0 / 2**n, rel=1e-12)
    assert paired_test(b, a).t_p == t.t_p  # two-sided: the sign does not matter


def test_two_seeds_are_not_certainty():
    # the review's case: two seeds that differ by the same amount gave t_p = 0
    t = paired_test([110.0, 120.0], [100.0, 110.0])
    assert t.t_p == 0.5 and t.wilcoxon_p == 0.5


def test_equal_up_to_rounding_is_no_spread():
    t = paired_test([1.0 + 1e-13, 1.0, 1.0], [0.0, 0.0, 0.0])
    assert t.t_p == 0.25 and t.wilcoxon_p == 0.25


def test_all_zero_differences_and_one_pair_have_nothing_to_test():
    t = paired_test([3.0, 4.0, 5.0], [3.0, 4.0, 5.0])
    assert (t.n, t.mean_diff) == (3, 0.0) and math.isnan(t.t_p) and math.isnan(t.wilcoxon_p)
    one = paired_test([3.0], [1.0])
    assert one.n == 1 and math.isnan(one.t_p) and math.isnan(one.wilcoxon_p)
    assert paired_test([], []) is None and paired_test([np.nan], [1.0]) is None


def test_a_normal_case_matches_scipy():
    rng = np.random.default_rng(3)
    b = rng.uniform(100, 150, 12)
    a = b * (1 - 0.3 + rng.normal(0, 0.05, 12))
    t = paired_test(a, b)
    assert t.t_p == pytest.approx(stats.ttest_rel(a, b).pvalue, rel=1e-12)
    assert t.wilcoxon_p == pytest.approx(stats.wilcoxon(a - b, method="exact").pvalue, rel=1e-12)
    assert t.mean_diff == pytest.approx(float(np.mean(a - b)))
    # non-finite pairs are left out, not counted
    t2 = paired_test(np.append(a, np.nan), np.append(b, 1.0))
    assert (t2.n, t2.t_p) == (12, t.t_p)


def _brute_force_signed_rank_p(d) -> float:
    d = np.asarray([x for x in d if x != 0], dtype=float)
    r = stats.rankdata(np.abs(d))
    c = r.sum() / 2
    w = r[d > 0].sum()
    every = [sum(ri for ri, s in zip(r, signs) if s) for signs in itertools.product([0, 1], repeat=len(d))]
    return float(np.mean([abs(x - c) >= abs(w - c) for x in every]))


@pytest.mark.parametrize("d", [[1, 2, 2, 3, -1], [1, 1, -1, 2, 2, 2, -3], [0, 1, 1, -2], [0, 0, 3, -1, 2],
                               [-0.5, 1.5, 2.5, -3.5, 4.5, 5.5, 6.5]])
def test_wilcoxon_is_exact_with_ties_and_zeros(d):
    t = paired_test(np.asarray(d, dtype=float), np.zeros(len(d)))
    assert t.wilcoxon_p == pytest.approx(_brute_force_signed_rank_p(d), rel=1e-12)


def test_wilcoxon_without_ties_matches_scipys_exact_and_is_scipys_above_the_enumeration():
    rng = np.random.default_rng(0)
    for _ in range(50):
        d = np.round(rng.normal(0.4, 1.0, int(rng.integers(2, EXACT_MAX_N + 1))), 6)
        assert paired_test(d, np.zeros(d.size)).wilcoxon_p == pytest.approx(
            stats.wilcoxon(d, method="exact").pvalue, rel=1e-12)
    d = rng.normal(0.4, 1.0, EXACT_MAX_N + 9)
    assert paired_test(d, np.zeros(d.size)).wilcoxon_p == pytest.approx(stats.wilcoxon(d).pvalue, rel=1e-12)


def test_no_p_is_0_for_a_finite_sample():
    many = paired_test(np.full(2000, 2.0), np.zeros(2000))  # 2 / 2**2000 is below the float range
    assert 0 < many.t_p < 1e-300 and 0 < many.wilcoxon_p
    rng = np.random.default_rng(1)
    tight = paired_test(1000.0 + rng.normal(0, 1e-3, 500), np.zeros(500))  # t is enormous
    assert tight.t_p > 0 and tight.wilcoxon_p > 0
