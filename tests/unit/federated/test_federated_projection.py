import math

import pytest

from testbed.federated.projection import GainModel, measured_h, project_gain


def test_formula():
    # gain(k) = (A - a) (1 - (1 + k)^-h)
    assert project_gain(0.6, 3, 0.5) == pytest.approx(0.4 * (1 - 4 ** -0.5))
    assert project_gain(0.6, 3, 0.5, ceiling=0.9) == pytest.approx(0.3 * 0.5)
    assert project_gain(1.0, 10, 1.0) == 0.0
    assert project_gain(0.5, 0, 1.0) == 0.0


def test_gain_grows_with_k_with_diminishing_returns():
    g = [project_gain(0.3, k, 0.2) for k in range(1, 50)]
    steps = [b - a for a, b in zip(g, g[1:])]
    assert all(s > 0 for s in steps) and all(b < a for a, b in zip(steps, steps[1:]))


def test_measured_h_inverts_the_projection():
    h = measured_h(0.3, 0.55, 7)
    assert project_gain(0.3, 7, h) == pytest.approx(0.25)
    assert measured_h(0.5, 0.4, 5) == 0.001              # lost accuracy: the lower bound
    assert measured_h(0.5, 1.0, 5) == 2.0                # closed every gap: the upper bound


def test_gain_model_ewma():
    m = GainModel(h=0.1, ewma=0.5)
    h_r = m.update(0.2, 0.6, 3)
    assert h_r == pytest.approx(math.log(0.8 / 0.4) / math.log(4))
    assert m.h == pytest.approx(0.5 * 0.1 + 0.5 * h_r)


def test_corrected_gain_recovers_a_known_law_from_measured_rounds():
    from testbed.federated.projection import CorrectedGain

    b, c = 0.05, 0.3                            # the "true" law: y = b + c ln(1 + k)
    m = CorrectedGain(window=10)
    assert m.project(0.5, 4) is None            # nothing measured yet
    for k, before in [(2, 0.3), (2, 0.4)]:
        after = 1 - (1 - before) * math.exp(-(b + c * math.log1p(k)))
        m.observe(before, after, k)
    assert m.fit() is None                      # one distinct k: no slope to fit
    for k, before in [(5, 0.45), (9, 0.5), (3, 0.6)]:
        after = 1 - (1 - before) * math.exp(-(b + c * math.log1p(k)))
        m.observe(before, after, k)
    fb, fc = m.fit()
    assert fb == pytest.approx(b) and fc == pytest.approx(c)
    assert m.project(0.7, 6) == pytest.approx(0.3 * (1 - math.exp(-(b + c * math.log1p(6)))))


def test_corrected_gain_never_lets_more_sites_close_less_and_forgets_old_rounds():
    from testbed.federated.projection import CorrectedGain

    m = CorrectedGain(window=3)
    m.observe(0.5, 0.7, 1)                      # few sites, big gain
    m.observe(0.5, 0.55, 20)                    # many sites, small gain: a negative slope
    _, c = m.fit()
    assert c == 0.0 and m.project(0.5, 1) == pytest.approx(m.project(0.5, 20))
    for k in (2, 3, 4):
        m.observe(0.5, 0.6, k)
    assert len(m.points) == 3 and {round(math.expm1(x)) for x, _ in m.points} == {2, 3, 4}
    m.observe(0.8, 0.7, 5)                      # a round that lost accuracy is a negative point
    assert m.points[-1][1] < 0
