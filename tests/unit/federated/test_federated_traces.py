import numpy as np
import pytest

from testbed.inputs import build_inputs
from testbed.traces.google_synthetic import google_like_power
from tests.unit.federated_support import tiny_scenario


def test_seeded_and_in_range():
    kw = dict(duration_s=2 * 86400, capacity_kw=10.0, local_offset_h=-6)
    a, b = google_like_power(seed=1, **kw), google_like_power(seed=1, **kw)
    c = google_like_power(seed=2, **kw)
    assert np.array_equal(a.values, b.values) and not np.array_equal(a.values, c.values)
    assert a.values.min() >= 0 and a.values.max() <= 10.0
    assert np.all(np.diff(a.times_s) == 300.0)


def test_statistics_resemble_the_google_pdus():
    levels, lag1 = [], []
    for seed in range(20):
        tr = google_like_power(duration_s=7 * 86400, seed=seed, capacity_kw=1.0, mode="utilisation")
        u = tr.values
        levels.append(u.mean())
        lag1.append(np.corrcoef(u[:-1], u[1:])[0, 1])
        assert 0.02 < u.std() < 0.12
    assert 0.45 <= min(levels) and max(levels) <= 0.75
    assert min(lag1) > 0.95  # 5-minute samples of a slow process, as in the real traces


def test_available_is_capacity_minus_utilisation():
    kw = dict(duration_s=86400, seed=3, capacity_kw=4.0)
    avail = google_like_power(mode="available", **kw).values
    util = google_like_power(mode="utilisation", **kw).values
    assert np.allclose(avail + util, 4.0)


def test_per_site_traces_from_the_scenario_differ_and_scale_with_nodes():
    inp = build_inputs(tiny_scenario())
    near, far = inp.renewable_kw["near"], inp.renewable_kw["far"]
    assert not np.array_equal(near.values, far.values)
    # capacity_per_active 1.6: near has 4 x 0.65 kW nodes -> capacity 4.16 kW
    assert near.values.max() <= 4.16 + 1e-9
    with pytest.raises(ValueError):
        google_like_power(duration_s=100, seed=0, capacity_kw=1.0, mean_util=(0.8, 0.2))
