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
