"""Fabric plans, qdisc parameters, scaling, clock and replay points: pure, no privileges."""

from __future__ import annotations

import threading
import time

import pytest

from testbed.errors import SpecError
from testbed.netem.owned.naming import if_name, new_run_id, ns_name, run_of_ns
from testbed.netem.plan import LinkInput, plan_fabric, unreachable
from testbed.netem.qdisc import MIN_BURST_BYTES, MIN_BURST_FRAME_BYTES, netem_params, tbf_params
from testbed.spec import scenario_from_dict
from testbed.substrate.emulated.clock import EmulationClock
from testbed.substrate.emulated.replay import change_points
from testbed.netem.scaling import choose_scaling
from testbed.traces import Trace
from tests.conftest import small_scenario_dict


def test_names_are_labelled_and_short():
    run = new_run_id()
    assert len(run) == 6 and run_of_ns(ns_name(run, "s-rome")) == run
    assert run_of_ns("tb-x-rome") is None and run_of_ns("other") is None
    assert len(if_name(run, "w9999a")) <= 15
    with pytest.raises(ValueError):
        if_name(run, "w99999999a")


def test_plan_addresses_and_multi_hop_routes():
    plan = plan_fabric("abc123", ["a", "b", "c"], [LinkInput("a", "b", 100, 100, 5), LinkInput("b", "c", 50, 50, 5)],
                       "relay")
    assert [s.addr for s in plan.sites] == ["10.200.0.1", "10.200.0.2", "10.200.0.3"]
    ab, bc = plan.links
    assert (ab.addr_a, ab.addr_b, bc.addr_a) == ("10.201.0.1", "10.201.0.2", "10.201.0.5")
    assert ab.relay_ns == "tb-abc123-r0" and ab.if_ra and ab.if_rb
    # a reaches c through b: first hop is link a-b, next-hop b's address on it
    assert ("10.200.0.3", "10.201.0.2", ab.if_a) in plan.routes["a"]
    assert unreachable(plan) == []
    assert set(plan.namespaces()) == {"tb-abc123-s-a", "tb-abc123-s-b", "tb-abc123-s-c", "tb-abc123-r0",
                                      "tb-abc123-r1", "tb-abc123-mgmt", "tb-abc123-ctl"}


def test_a_links_ends_by_side_and_by_site():
    plan = plan_fabric("abe125", ["a", "b"], [LinkInput("a", "b", 100, 30, 5)], "relay")
    (ab,) = plan.links
    assert ab.end("a") == ("a", "a", ab.if_a, ab.addr_a, 100) and ab.end("b") == ("b", "b", ab.if_b, ab.addr_b, 30)
    assert ab.end_at("b") == ab.end("b") and ab.end_at("a").rate_mbit == 100
    with pytest.raises(ValueError, match="'a' or 'b'"):
        ab.end("c")
    with pytest.raises(KeyError, match="does not join z"):
        ab.end_at("z")
    # routes leave by the sending site's own interface, to the far end's address
    assert plan.routes["b"] == (("10.200.0.1", ab.addr_a, ab.if_b),)


def test_plan_prefers_low_latency_paths_and_reports_islands():
    links = [LinkInput("a", "b", 1, 1, 50), LinkInput("a", "c", 1, 1, 5), LinkInput("c", "b", 1, 1, 5)]
    plan = plan_fabric("abc123", ["a", "b", "c", "d"], links, "none")
    route_to_b = [r for r in plan.routes["a"] if r[0] == plan.site("b").addr][0]
    assert route_to_b[2] == plan.link("a", "c").if_a  # 5 + 5 ms beats 50 ms
    assert ("a", "d") in unreachable(plan)
    assert all(lk.relay_ns is None for lk in plan.links)  # impairment 'none': no relays


def test_tbf_params_keep_burst_and_queue_large_enough():
    p = tbf_params(100, rtt_ms=40)
    assert p.rate_bytes_s == 12_500_000 and p.burst_bytes >= MIN_BURST_BYTES
    assert p.limit_bytes - p.burst_bytes >= 12_500_000 * 0.08  # 2 x RTT of queue
    assert tbf_params(10_000).burst_bytes == int(1.25e9 * 0.004)
    # where no frame exceeds the MTU the burst floor is 16 frames, not 256 KiB: a 200 kB transfer is shaped
    assert tbf_params(10, mtu_frames=True).burst_bytes == MIN_BURST_FRAME_BYTES < 200_000 < MIN_BURST_BYTES
    assert tbf_params(10).burst_bytes == MIN_BURST_BYTES
    assert tbf_params(10_000, mtu_frames=True).burst_bytes == int(1.25e9 * 0.004)  # the rate's 4 ms rules
    assert tbf_params(10, mtu_frames=True).limit_bytes - MIN_BURST_FRAME_BYTES == tbf_params(10).limit_bytes - MIN_BURST_BYTES
    for bad in (0, -1, 1e6):
        with pytest.raises(ValueError):
            tbf_params(bad)
    n = netem_params(20, 2, 1, 1000)
    assert n.kwargs() == {"delay": 20000, "limit": n.limit_packets, "jitter": 2000, "loss": 1.0}
    assert n.limit_packets > 1000


def test_scaling_auto_and_fixed():
    sc = scenario_from_dict(small_scenario_dict(emulation={"time_scale": 100}))
    s = choose_scaling(sc, capacity_mbit=500)
    assert s.byte_scale == pytest.approx(500 / (10_000 * 100))
    assert s.rate_mbit(10) == pytest.approx(500)
    assert s.delay_ms(20) == pytest.approx(0.2)
    assert s.scenario_s(s.wall_s(123.0)) == pytest.approx(123.0)
    # a fixed byte scale that overdrives the machine is refused, naming the field
    sc2 = scenario_from_dict(small_scenario_dict(emulation={"time_scale": 100, "byte_scale": 0.01}))
    with pytest.raises(SpecError) as e:
        choose_scaling(sc2, capacity_mbit=500)
    assert e.value.problems[0][0] == "emulation.byte_scale"


def test_change_points_skip_unchanged_and_apply_scaling():
    tr = Trace([0, 300, 600, 900], [10, 10, 5, 10], unit="Gbit/s", name="bw", end_s=1200)
    pts = change_points({("a", "b"): tr}, lambda g: g * 100, 1200)
    assert [(c.t_s, c.rate_mbit) for c in pts] == [(600.0, 500.0), (900.0, 1000.0)]


def test_clock_runs_scaled_and_jumps():
    clock = EmulationClock(1000.0)
    clock.start(0.0)
    time.sleep(0.02)
    assert 10 < clock.now_s() < 200
    clock.jump_to(5000)
    assert clock.now_s() >= 5000 and clock.skipped_s > 4000
    woke = []
    th = threading.Thread(target=lambda: woke.append(clock.wait_until(1e9)))
    th.start()
    clock.jump_to(2e9)
    th.join(timeout=2)
    assert woke == [True]
    stop = threading.Event()
    stop.set()
    assert clock.wait_until(1e12, stop) is False


def test_clock_remembers_what_it_skipped():
    clock = EmulationClock(1.0)
    clock.start(0.0)
    clock.jump_to(1000.0)
    assert clock.skipped_over(500.0) and not clock.skipped_over(1500.0)


def test_a_tbf_burst_reads_back_from_the_kernels_ticks():
    """What change_rate compares against: the burst the kernel holds, from its rate and buffer ticks
    (encoded as pyroute2 encodes them)."""
    from pyroute2.netlink.rtnl.tcmsg.common import calc_xmittime

    from testbed.netem.qdisc import burst_bytes_of

    for rate_mbit, burst in ((40, 24_224), (100, 50_000), (2000, MIN_BURST_BYTES), (10_000, 5_000_000)):
        rate = int(rate_mbit * 1e6 / 8)
        # tc (and pyroute2) truncate the burst's time to whole microseconds before converting to ticks
        assert 0 <= burst - burst_bytes_of(rate, calc_xmittime(rate, burst)) <= rate * 1e-6 + 1


class _Ipr:
    """The netlink calls change_rate makes, recorded; the kernel holding a tbf of ``held`` bytes."""

    def __init__(self, held: int | None):
        self.held, self.calls = held, []

    def get_qdiscs(self, index):
        from pyroute2.netlink.rtnl.tcmsg.common import calc_xmittime

        if self.held is None:
            return []
        rate = 12_500_000
        parms = {"rate": rate, "buffer": calc_xmittime(rate, self.held)}

        class Q:
            def get_attr(self, name):
                return "tbf" if name == "TCA_KIND" else type("O", (), {"get_attr": lambda _s, _n: parms})()
        return [Q()]

    def tc(self, *args, **kw):
        self.calls.append(kw)


@pytest.mark.parametrize("held,want", [(50_000, 50_000), (10_000, MIN_BURST_FRAME_BYTES), (None, MIN_BURST_FRAME_BYTES)])
def test_a_small_burst_never_shrinks_below_the_one_the_kernel_holds(held, want):
    from testbed.netem.qdisc import change_rate

    new = tbf_params(40, mtu_frames=True)  # 24 KiB: the floor
    ipr = _Ipr(held)
    change_rate(ipr, 3, new)
    (call,) = ipr.calls
    assert call["burst"] == want and call["limit"] == new.limit_bytes - new.burst_bytes + want
    big = _Ipr(10_000_000)  # bursts of 256 KiB and more (GSO links) are set as asked
    change_rate(big, 3, tbf_params(40))
    assert big.calls[0]["burst"] == MIN_BURST_BYTES
