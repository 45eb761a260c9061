import math

import pytest

from testbed.federated.capacity import site_capacity
from testbed.federated.roundtime import RoundTimeModel, SiteTime, compute_s, transfer_s
from testbed.power.node_model import NodePower
from testbed.spec.topology import BUILTIN_NODE_TYPES


def test_compute_and_transfer_arithmetic():
    # 2 epochs x 100 samples x scale 10 / (20 samples/s x 5 reference nodes) = 20 s
    assert compute_s(100, 5.0, epochs=2, data_scale=10, samples_per_s=20) == pytest.approx(20.0)
    assert compute_s(100, 0.0, epochs=1, data_scale=1, samples_per_s=1) == math.inf
    # 1 GB at 10 Gbit/s = 0.8 s, plus 20 ms latency
    assert transfer_s(1e9, 10.0, 20.0) == pytest.approx(0.82)


def test_straggler_is_the_slowest_site_and_pooled_is_eq7():
    m = RoundTimeModel("straggler", epochs=1, data_scale=1.0, samples_per_s=10.0, total_samples=1000)
    a = SiteTime("a", 100, 10.0, compute_s=1.0, down_s=2.0, up_s=3.0)    # total 6
    b = SiteTime("b", 100, 1.0, compute_s=10.0, down_s=0.5, up_s=0.5)   # total 11
    assert m.round_s([a, b]) == pytest.approx(11.0)
    # pooled: the selected sites' work, 1 x (100 + 100) x 1 / (10 x (10 + 1)) + max(5, 1)
    assert m.round_s([a, b], "pooled") == pytest.approx(200 / 110 + 5.0)
    # Eq. 7 as written: the whole training set, 1 x 1000 x 1 / (10 x (10 + 1)) + max(5, 1) = 9.0909 + 5
    assert m.round_s([a, b], "pooled_eq7_as_written") == pytest.approx(1000 / 110 + 5.0)
    # adding a fast site lowers the pooled round but cannot lower the straggler round
    c = SiteTime("c", 100, 100.0, compute_s=0.1, down_s=0.1, up_s=0.1)
    assert m.round_s([a, b, c], "pooled_eq7_as_written") < m.round_s([a, b], "pooled_eq7_as_written")
    assert m.round_s([a, b, c]) == m.round_s([a, b])
    assert m.centralized_s(4.0) == pytest.approx(1000 / 40)
    assert RoundTimeModel("straggler", 5, 1.0, 10.0, 1000).centralized_s(4.0, epochs=1) == pytest.approx(1000 / 40)


def test_pooled_and_straggler_clocks_charge_the_same_samples():
    m = RoundTimeModel("straggler", epochs=3, data_scale=2.0, samples_per_s=10.0, total_samples=1000)
    sites = [SiteTime(n, s, c, compute_s(s, c, epochs=3, data_scale=2.0, samples_per_s=10.0), 0.0, 0.0)
             for n, s, c in (("a", 15, 2.0), ("b", 14, 1.0), ("c", 15, 4.0))]
    assert m.samples_charged(sites, "straggler") == m.samples_charged(sites, "pooled") == 3 * 44
    assert m.samples_charged(sites, "pooled_eq7_as_written") == 3 * 1000
    # the pooled compute is that work over the summed capacity; with equal per-capacity work the clocks agree
    assert m.round_s(sites, "pooled") == pytest.approx(3 * 44 * 2.0 / (10.0 * 7.0))
    even = [SiteTime(n, 10 * int(c), c, compute_s(10 * int(c), c, epochs=3, data_scale=2.0, samples_per_s=10.0),
                     0.0, 0.0) for n, c in (("a", 1.0), ("b", 2.0), ("c", 4.0))]
    assert m.round_s(even, "pooled") == pytest.approx(m.round_s(even, "straggler"))
    assert m.round_s(even, "pooled_eq7_as_written") > 10 * m.round_s(even, "straggler")


def test_capacity_is_min_of_hardware_and_power():
    node = NodePower.of(BUILTIN_NODE_TYPES["a100-server"], "a100")
    free = site_capacity("x", node, 8, available_kw=0.0, grid_topup_kw=None)
    assert free.capacity == pytest.approx(8 * 1.6) and free.n_active == 8
    full = site_capacity("x", node, 8, available_kw=8 * 0.65, grid_topup_kw=0.0)
    assert full.capacity == pytest.approx(8 * 1.6)
    half = site_capacity("x", node, 8, available_kw=4 * 0.65, grid_topup_kw=0.0)
    assert 4 * 1.6 - 1e-9 <= half.capacity < 8 * 1.6
    assert half.power_kw <= 4 * 0.65 + 1e-9
    none = site_capacity("x", node, 8, available_kw=0.2, grid_topup_kw=0.0)
    assert not none.usable and none.capacity == 0
    caps = [site_capacity("x", node, 8, available_kw=p, grid_topup_kw=0.0).capacity for p in (0.5, 1, 2, 3, 5, 8)]
    assert caps == sorted(caps)
