"""An emulated federated exchange says when its update transfers are too small for the link shapers:
a token bucket lets its burst through at line rate (at least 256 KiB where GSO super-frames can leave
the interface, 16 frames where a frame-mode relay keeps every frame at the MTU), so a transfer of a
few bursts is not held to the link's rate and measured exchanges come out shorter than the links allow."""

from __future__ import annotations

import warnings

import pytest

from testbed.errors import TestbedWarning
from testbed.federated.netns_exchange import MIN_BURSTS, NetnsExchange
from testbed.inputs import build_inputs
from testbed.netem.fabric import relay_gso
from testbed.netem.qdisc import MIN_BURST_FRAME_BYTES
from testbed.spec.load import scenario_from_dict
from testbed.substrate.emulated.wan import plan_wan
from tests.unit.federated_support import tiny


def _exchange(byte_scale: float, time_scale: float = 1.0) -> tuple[NetnsExchange, object]:
    d = tiny()
    d["emulation"] = {"time_scale": time_scale, "byte_scale": byte_scale}
    inp = build_inputs(scenario_from_dict(d))
    ex = NetnsExchange(inp, impairment="relay")
    ex.scaling, plan = plan_wan(inp, ex.run_id, impairment="relay", capacity_mbit=10_000)
    return ex, plan


def test_updates_of_a_few_bursts_are_flagged():
    # 1 GB -> 200 kB; the links carry 0.2-2 Mbit/s on the wire: frame-mode relays, 16-frame bursts (24 KiB)
    ex, plan = _exchange(byte_scale=0.0002)
    assert not any(relay_gso(li) for li in plan.links)
    with pytest.warns(TestbedWarning, match=r"0\.20 MB on the wire .* burst of 24 KiB"):
        ex._check_burst(plan)
    assert ex.burst_share == pytest.approx(MIN_BURST_FRAME_BYTES / 200_000)


def test_links_that_send_super_frames_keep_the_large_burst():
    ex, plan = _exchange(byte_scale=0.0002, time_scale=250)  # 10 Gbit/s -> 500 Mbit/s on the wire: GSO relay
    assert relay_gso(max(plan.links, key=lambda li: li.rate_ab_mbit))
    with pytest.warns(TestbedWarning, match=r"0\.20 MB on the wire .* burst of 256 KiB"):
        ex._check_burst(plan)
    assert ex.burst_share > 1.0


def test_updates_of_many_bursts_pass_quietly():
    ex, plan = _exchange(byte_scale=0.01)  # 10 MB: 38 bursts
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ex._check_burst(plan)
    assert ex.burst_share < 1.0 / MIN_BURSTS
