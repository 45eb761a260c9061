"""Where a live fabric's scaling cannot reproduce a scenario's cross-traffic: the cautions said before a
run (testbed.crosstraffic.fidelity)."""

from __future__ import annotations

import pytest

from testbed.crosstraffic.fidelity import MIN_JOIN_WALL_S, MIN_WIRE_MBIT, cautions
from testbed.netem.scaling import Scaling
from tests.unit.crosstraffic.test_cross_traffic import scenario


def scaling(time_scale: float, byte_scale: float) -> Scaling:
    return Scaling(time_scale=time_scale, byte_scale=byte_scale, capacity_mbit=1e9, byte_scale_source="scenario")


TCP3 = [{"src": "a", "dst": "b", "tcp": {"flows": 3}}]


def test_a_short_transfer_beside_tcp_flows_is_cautioned_and_a_long_one_is_not():
    sc = scenario(TCP3)
    # 1 Gbit/s -> 400 Mbit/s on the wire; fair share 0.25 Gbit/s: 1 GB = 32 scenario s = 0.32 wall s
    (line,) = cautions(sc, scaling(100, 0.004), [1.0, 40.0])
    assert line.startswith("cross_traffic a -> b: a 1 GB move lasts 0.32 s on the wire") and "time_scale 100" in line
    # 4 GB: 1.28 wall s (measured 1.05-1.09 x the model), past the limit
    assert cautions(sc, scaling(100, 0.004), [4.0, 40.0]) == []
    assert 4 * 8 / 0.25 / 100 > MIN_JOIN_WALL_S > 1 * 8 / 0.25 / 100
    # the same 1 GB at time_scale 10 lasts 3.2 s on the wire
    assert cautions(sc, scaling(10, 0.04), [1.0]) == []


def with_queue(queue: str):
    from tests.unit.crosstraffic.test_cross_traffic import BASE

    return scenario(TCP3, links=[{**BASE["links"][0], "queue": queue}, BASE["links"][1]])


def test_a_slow_fifo_link_on_the_wire_is_cautioned_and_a_fair_one_is_not():
    lines = cautions(with_queue("fifo"), scaling(100, 0.002), [40.0])
    assert len(lines) == 1 and "fifo" in lines[0] and "200 Mbit/s on the wire" in lines[0]
    assert f"below {MIN_WIRE_MBIT:.0f}" in lines[0]
    assert cautions(with_queue("fair"), scaling(100, 0.002), [40.0]) == []  # the default: 0.239 of 20 Mbit/s
    assert cautions(scenario(TCP3), scaling(100, 0.002), [40.0]) == []
    assert cautions(with_queue("fifo"), scaling(100, 0.004), [40.0]) == []  # 400 Mbit/s on the wire


@pytest.mark.parametrize("cross", [
    [{"src": "a", "dst": "b", "udp": {"rate_gbps": 0.1}}],  # no standing queue of TCP flows
    [{"src": "a", "dst": "b", "poisson": {"arrivals_per_s": 2, "mean_size_mb": 10}}],
    [],
])
def test_no_caution_without_long_lived_tcp_cross_traffic(cross):
    assert cautions(scenario(cross), scaling(100, 0.001), [0.1]) == []


def test_the_other_direction_and_on_off_flows_count():
    sc = scenario([{"src": "b", "dst": "a", "on_off": {"flows": 2, "on_s": 5, "off_s": 5}}])
    (line,) = cautions(sc, scaling(100, 0.004), [4.0])
    assert line.startswith("cross_traffic b -> a:")
    assert cautions(sc, scaling(100, 0.004), []) == []  # nothing to move: only the wire rate matters
