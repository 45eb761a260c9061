"""Cross-traffic (issue #33): the scenario field, the sim's fair-share model, the predictor's bandwidth bases."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from testbed.crosstraffic.model import (Load, LoadTraceError, expected_load, fair_share_gbps, on_off_count,
                                        read_load_trace, share_trace)
from testbed.crosstraffic.predict import BandwidthEstimator, Probe
from testbed.errors import SpecError
from testbed.spec.cross_traffic import CrossTraffic
from testbed.spec.load import scenario_from_dict
from testbed.traces.base import Trace

BASE = {
    "name": "xt",
    "duration_h": 24,
    "traces": {"renewable": {"default": {"kind": "solar", "capacity_kw": 3}}},
    "sites": [{"name": "a", "lat_deg": 50, "lon_deg": 8}, {"name": "b", "lat_deg": 48, "lon_deg": 2},
              {"name": "c", "lat_deg": 45, "lon_deg": 9}],
    "links": [{"a": "a", "b": "b", "bandwidth_gbps": 1, "latency_ms": 10},
              {"a": "b", "b": "c", "bandwidth_gbps": 1, "latency_ms": 10}],
    "workloads": {"jobs": [{"checkpoint_gb": 10, "work_gpu_h": 10, "origin": "a"}]},
    "policies": ["feasibility_aware"],
}


def scenario(cross, **extra):
    d = copy.deepcopy(BASE)
    d["cross_traffic"] = cross
    d.update(extra)
    return scenario_from_dict(d)


# ----------------------------------------------------------------------------- the scenario field


def test_spec_accepts_every_kind_and_defaults_to_none():
    assert scenario_from_dict(copy.deepcopy(BASE)).cross_traffic == []
    sc = scenario([{"src": "a", "dst": "b", "tcp": {"flows": 3, "congestion": "reno"}, "udp": {"rate_gbps": 0.1},
                    "on_off": {"flows": 2, "on_s": 5, "off_s": 10},
                    "poisson": {"arrivals_per_s": 2, "mean_size_mb": 10}}])
    e = sc.cross_traffic[0]
    assert (e.tcp.flows, e.tcp.congestion, e.udp.rate_gbps, e.on_off.flows, e.poisson.pareto_shape) == (3, "reno", 0.1, 2, 1.5)
    assert e.key == ("a", "b")


@pytest.mark.parametrize("entry, field", [
    ({"src": "a", "dst": "b"}, "cross_traffic"),  # no load
    ({"src": "a", "dst": "c", "tcp": {"flows": 1}}, "cross_traffic[0]"),  # no link a-c
    ({"src": "a", "dst": "zz", "tcp": {"flows": 1}}, "cross_traffic[0].dst"),
    ({"src": "a", "dst": "b", "tcp": {"flows": 0}}, "cross_traffic"),
    ({"src": "a", "dst": "b", "tcp": {"flows": 65}}, "cross_traffic"),
    ({"src": "a", "dst": "b", "poisson": {"arrivals_per_s": 1, "mean_size_mb": 1, "pareto_shape": 1.0}}, "cross_traffic"),
    ({"src": "a", "dst": "b", "udp": {"rate_gbps": -1}}, "cross_traffic"),
    ({"src": "a", "dst": "b", "trace": "no-such-file.csv"}, "cross_traffic[0].trace"),
    ({"src": "a", "dst": "b", "udp": {"rate_gbps": 1.5}}, "cross_traffic[0].udp.rate_gbps"),  # over the 1 Gbit/s link
    ({"src": "a", "dst": "b", "udp": {"rate_gbps": 1e308}}, "cross_traffic[0].udp.rate_gbps"),
])
def test_spec_refuses(entry, field):
    with pytest.raises(SpecError) as e:
        scenario([entry])
    assert any(p.startswith(field) for p, _ in e.value.problems), e.value.problems


def test_trace_file_is_resolved_and_checked(tmp_path):
    (tmp_path / "x.csv").write_text("t_s,flows,udp_gbps\n0,1,0\n3600,4,0.2\n")
    (tmp_path / "bad.csv").write_text("t_s,flows\n0,1\n0,2\n")
    d = copy.deepcopy(BASE)
    d["cross_traffic"] = [{"src": "b", "dst": "a", "trace": "x.csv"}]
    sc = scenario_from_dict(d, tmp_path)
    assert sc.cross_traffic[0].trace == str((tmp_path / "x.csv").resolve())
    d["cross_traffic"] = [{"src": "b", "dst": "a", "trace": "bad.csv"}]
    with pytest.raises(SpecError, match="must increase"):
        scenario_from_dict(d, tmp_path)
    (tmp_path / "flood.csv").write_text("t_s,flows,udp_gbps\n0,1,0\n3600,0,2.5\n")  # over the 1 Gbit/s link
    d["cross_traffic"] = [{"src": "b", "dst": "a", "trace": "flood.csv"}]
    with pytest.raises(SpecError) as e:
        scenario_from_dict(d, tmp_path)
    assert e.value.problems[0][0] == "cross_traffic[0].trace" and "reaches 2.5" in e.value.problems[0][1]
    d["cross_traffic"] = [{"src": "a", "dst": "b", "udp": {"rate_gbps": 1.0}}]  # the link's rate: allowed
    assert scenario_from_dict(d, tmp_path).cross_traffic[0].udp.rate_gbps == 1.0


def test_read_load_trace(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("t_s,flows\n0,2\n10,0\n")
    tr = read_load_trace(p)
    assert tr.at(-5) == (2, 0.0) and tr.at(9.9) == (2, 0.0) and tr.at(10) == (0, 0.0)
    p.write_text("t_s,flows\n0,1.5\n")
    with pytest.raises(LoadTraceError, match="integer"):
        read_load_trace(p)


# ----------------------------------------------------------------------------- the model


@pytest.mark.parametrize("queue", ["fair", "fifo"])
def test_fair_share_without_udp_does_not_depend_on_the_queue(queue):
    assert fair_share_gbps(1.0, Load(), queue=queue) == 1.0
    assert fair_share_gbps(1.0, Load(tcp_flows=3), queue=queue) == pytest.approx(0.25)
    assert fair_share_gbps(1.0, Load(tcp_flows=1, poisson_gbps=0.4), queue=queue) == pytest.approx(0.3)
    assert fair_share_gbps(1.0, Load(poisson_gbps=5), queue=queue) == pytest.approx(0.01)  # never nothing
    with pytest.raises(ValueError):
        fair_share_gbps(0.0, Load(), queue=queue)


def test_fifo_udp_takes_its_rate_first():
    assert fair_share_gbps(1.0, Load(udp_gbps=0.4, udp_streams=1), queue="fifo") == pytest.approx(0.6)
    assert fair_share_gbps(1.0, Load(tcp_flows=1, udp_gbps=0.2, poisson_gbps=0.2, udp_streams=1),
                           queue="fifo") == pytest.approx(0.3)
    assert fair_share_gbps(1.0, Load(udp_gbps=5, udp_streams=1), queue="fifo") == pytest.approx(0.01)


def test_a_fair_queue_caps_each_udp_stream_at_one_flows_share():
    """Max-min fairness: UDP under its fair level keeps its rate (as on fifo); above it, every flow,
    each UDP stream included, gets the same share. Measured on netns (a 1 Gbit/s link, UDP asking
    0.75 of it beside one transfer): the transfer got 0.499."""
    one = Load(udp_gbps=0.75, udp_streams=1)
    assert fair_share_gbps(1.0, one, queue="fair") == pytest.approx(0.5)
    assert fair_share_gbps(1.0, one, queue="fifo") == pytest.approx(0.25)
    assert fair_share_gbps(1.0, Load(udp_gbps=5, udp_streams=1), queue="fair") == pytest.approx(0.5)
    # the heavy level: 3 flows and UDP at 0.1 B: under its level (0.2), so the same on both queues
    heavy = Load(tcp_flows=3, udp_gbps=0.1, udp_streams=1)
    assert fair_share_gbps(1.0, heavy, queue="fair") == fair_share_gbps(1.0, heavy, queue="fifo") == pytest.approx(0.225)
    # two streams of 0.3 each beside 1 flow and the transfer: level 1/4 < 0.3: all get 0.25
    assert fair_share_gbps(1.0, Load(tcp_flows=1, udp_gbps=0.6, udp_streams=2), queue="fair") == pytest.approx(0.25)
    # continuous where a stream meets the level: 1 flow + transfer + 1 stream of exactly 1/3
    at = Load(tcp_flows=1, udp_gbps=1 / 3, udp_streams=1)
    assert fair_share_gbps(1.0, at, queue="fair") == pytest.approx(1 / 3)
    # Poisson load is served first on both: what it leaves is shared
    assert fair_share_gbps(1.0, Load(udp_gbps=0.9, poisson_gbps=0.4, udp_streams=1), queue="fair") == pytest.approx(0.3)
    with pytest.raises(ValueError, match="queue"):
        fair_share_gbps(1.0, one, queue="red")


def test_expected_load_counts_each_udp_stream():
    entries = [CrossTraffic(src="a", dst="b", udp={"rate_gbps": 0.2}),
               CrossTraffic(src="a", dst="b", udp={"rate_gbps": 0.1}, tcp={"flows": 1}),
               CrossTraffic(src="a", dst="b", tcp={"flows": 2})]
    load = expected_load(entries, 0.0)
    assert (load.udp_streams, load.tcp_flows) == (2, 3.0) and load.udp_gbps == pytest.approx(0.3)


def test_expected_load_counts_on_off_at_its_duty_cycle_and_poisson_as_load():
    e = CrossTraffic(src="a", dst="b", tcp={"flows": 2}, on_off={"flows": 4, "on_s": 1, "off_s": 3},
                     poisson={"arrivals_per_s": 10, "mean_size_mb": 5})
    load = expected_load([e], 0.0)
    assert load.tcp_flows == pytest.approx(3.0)
    assert load.poisson_gbps == pytest.approx(0.4)


def test_share_trace_follows_the_on_off_schedule():
    bw = Trace([0.0, 100.0], [1.0, 0.5], unit="Gbit/s", name="bw", end_s=200.0)
    e = CrossTraffic(src="a", dst="b", on_off={"flows": 3, "on_s": 2, "off_s": 2})
    tr = share_trace(bw, [e], seed=1, direction=("a", "b"), queue="fair")
    from testbed.crosstraffic.model import on_off_phases

    ph = on_off_phases(3, 4.0, 1, ("a", "b", 0))
    for t in np.linspace(0, 199, 57):
        assert tr.at(t) == pytest.approx(bw.at(t) / (on_off_count(t, ph, 2, 2) + 1))
    # on average half of the flows are on: the share integrates to about B / (1.5 + 1)... between 1/4 and 1
    mean = tr.integrate(0, 100) / 100
    assert 0.25 < mean < 1.0


def test_sim_transfer_gets_its_fair_share():
    from testbed.inputs import build_inputs
    from testbed.substrate.base import MigrationOrder
    from testbed.substrate.sim.substrate import SimSubstrate

    sc0 = scenario([], substrate={"slow_start": False, "io_model": "constant"})
    sc3 = scenario([{"src": "a", "dst": "b", "tcp": {"flows": 3}}], substrate={"slow_start": False, "io_model": "constant"})
    order = MigrationOrder("j", "a", "b", 10.0, 0.0)
    t = []
    for sc in (sc0, sc3):
        sub = SimSubstrate(build_inputs(sc, 0))
        sub.start_migration(order)
        t.append(sub.pending_outcomes()[0].transfer_s)
    assert t[1] / t[0] == pytest.approx(4.0)
    # the other direction has none
    sub = SimSubstrate(build_inputs(sc3, 0))
    sub.start_migration(MigrationOrder("j", "b", "a", 10.0, 0.0))
    assert sub.pending_outcomes()[0].transfer_s == pytest.approx(t[0])


# ----------------------------------------------------------------------------- the predictor's bases


def _inputs(cross):
    from testbed.inputs import build_inputs

    return build_inputs(scenario(cross), 0)


def test_bases():
    inp = _inputs([{"src": "a", "dst": "b", "tcp": {"flows": 3}}])
    nominal = BandwidthEstimator(inp, "nominal")
    fair = BandwidthEstimator(inp, "fair_share")
    assert nominal.gbps("a", "b", 0.0) == pytest.approx(1.0)
    assert fair.gbps("a", "b", 0.0) == pytest.approx(0.25)
    assert fair.gbps("b", "a", 0.0) == pytest.approx(1.0)  # no cross-traffic that way
    assert nominal.probe_for("a", "b", 0.0) is None
    calls = []

    def prober(src, dst, t, d):
        calls.append((src, dst, t))
        return Probe(0.3, d, 123)

    probe = BandwidthEstimator(inp, "probe", probe_s=3.0, prober=prober)
    assert probe.gbps("a", "b", 0.0) == 0.3 and probe.gbps("a", "b", 0.0) == 0.3
    assert calls == [("a", "b", 0.0)]  # one probe per direction and decision time
    assert probe.probe_for("a", "b", 0.0) == Probe(0.3, 3.0, 123)
    with pytest.raises(ValueError):
        BandwidthEstimator(inp, "probe").gbps("a", "b", 0.0)
    with pytest.raises(ValueError):
        BandwidthEstimator(inp, "guess")


def test_sim_probe_is_the_share_with_noise():
    from testbed.substrate.sim.substrate import SimSubstrate

    sub = SimSubstrate(_inputs([{"src": "a", "dst": "b", "tcp": {"flows": 3}}]))
    ratios = [sub.probe_bandwidth("a", "b", float(t), 2.0).gbps / 0.25 for t in range(0, 20000, 300)]
    assert 0.9 < float(np.median(ratios)) < 1.1
    assert 0.05 < float(np.std(np.log(ratios))) < 0.15
    p = sub.probe_bandwidth("a", "b", 0.0, 2.0)
    assert p == sub.probe_bandwidth("a", "b", 0.0, 2.0) and p.scenario_s == 2.0 and p.bytes_sent > 0


def test_a_run_records_the_basis_per_migration():
    import testbed

    d = copy.deepcopy(BASE)
    d["cross_traffic"] = [{"src": s, "dst": t, "tcp": {"flows": 3}} for s, t in (("a", "b"), ("b", "a"), ("b", "c"), ("c", "b"))]
    d["traces"]["renewable"] = {"default": {"kind": "curtailment_windows", "capacity_kw": 1.5, "mean_window_h": 2.5,
                                            "windows_per_day": 2}}
    d["workloads"] = {"arrivals": {"kind": "poisson", "jobs_per_day": 8, "until_h": 20},
                      "mix": [{"family": "x", "checkpoint_gb": 20, "work_gpu_h": [4, 8]}]}
    d["policies"] = [{"name": "no_filter", "label": f"nf-{b}", "bandwidth_basis": b} for b in ("nominal", "fair_share", "probe")]
    res = testbed.run(d, substrate="sim", plots=False)
    m = res.migrations
    assert len(m) > 0
    for b in ("nominal", "fair_share", "probe"):
        rows = m[m.label == f"nf-{b}"]
        assert len(rows) > 0 and set(rows.predicted_bandwidth_basis) == {b}
        assert rows.probe_s.notna().all() == (b == "probe")
    # under 3 competing flows the fair share predicts the transfer, the nominal rate does not
    nom, fair = (m[m.label == f"nf-{b}"] for b in ("nominal", "fair_share"))
    err = {b: float(np.median(abs(r.predicted_transfer_s / r.outcome_transfer_s - 1))) for b, r in (("nominal", nom), ("fair_share", fair))}
    assert err["fair_share"] < 0.2 < err["nominal"]


def test_a_load_level_stands_for_its_entries_on_every_link_direction():
    d = copy.deepcopy(BASE)
    d["links"][1]["bandwidth_b_to_a_gbps"] = 0.5  # c -> b runs at 0.5 Gbit/s
    d["cross_traffic"] = "heavy"
    sc = scenario_from_dict(d)
    assert [e.key for e in sc.cross_traffic] == [("a", "b"), ("b", "a"), ("b", "c"), ("c", "b")]
    assert all(e.tcp.flows == 3 for e in sc.cross_traffic)
    assert [e.udp.rate_gbps for e in sc.cross_traffic] == pytest.approx([0.1, 0.1, 0.1, 0.05])
    assert scenario("none").cross_traffic == []
    assert [e.tcp.flows for e in scenario("light").cross_traffic] == [1, 1, 1, 1]
    bursty = scenario("bursty").cross_traffic
    assert all(e.on_off.flows == 4 and e.poisson.arrivals_per_s == pytest.approx(0.2) for e in bursty)
    # the same as declaring the entries: the sim's share is the same
    listed = scenario([e.model_dump(exclude_none=True) for e in scenario("heavy").cross_traffic])
    assert listed.cross_traffic == scenario("heavy").cross_traffic


@pytest.mark.parametrize("bad, words", [
    ("hevy", ["cross_traffic", "unknown load level 'hevy'", "none, light, heavy, bursty"]),
    (3, ["cross_traffic", "must be a list"]),
    ({"preset": "heavy"}, ["cross_traffic"]),
])
def test_a_bad_load_level_names_the_field(bad, words):
    with pytest.raises(SpecError) as e:
        scenario(bad)
    text = str(e.value)
    assert all(w in text for w in words), text


def test_a_load_level_needs_links():
    d = copy.deepcopy(BASE)
    d["sites"], d["links"], d["cross_traffic"] = d["sites"][:1], [], "light"
    with pytest.raises(SpecError, match=r"cross_traffic.*no links"):
        scenario_from_dict(d)


def test_queue_delay_depends_on_the_links_queue():
    from testbed.crosstraffic.model import FAIR_QUEUE_TURN_BYTES, has_standing_queue, queue_delay_ms

    assert queue_delay_ms("fifo", 20.0, 3, 1.0) == 50.0 and queue_delay_ms("fifo", 40.0, 3, 1.0) == 80.0
    # fair: one turn of each competing flow: 3 x 1514 B at 1 Gbit/s = 36 us, at 10 Mbit/s 3.6 ms
    assert queue_delay_ms("fair", 20.0, 3, 1.0) == pytest.approx(3 * FAIR_QUEUE_TURN_BYTES * 8 / 1e9 * 1e3)
    assert queue_delay_ms("fair", 20.0, 3, 0.01) == pytest.approx(3.6336, rel=1e-4)
    assert queue_delay_ms("fair", 20.0, 0, 1.0) == 0.0
    with pytest.raises(ValueError, match="queue"):
        queue_delay_ms("red", 20.0, 1, 1.0)
    with pytest.raises(ValueError, match="rate_gbps"):
        queue_delay_ms("fair", 20.0, 1, 0.0)
    assert has_standing_queue([CrossTraffic(src="a", dst="b", tcp={"flows": 1})])
    assert not has_standing_queue([CrossTraffic(src="a", dst="b", udp={"rate_gbps": 0.1})])


@pytest.mark.parametrize("queue, extra_ms", [("fifo", 50.0), ("fair", 3 * 1514 * 8 / 1e9 * 1e3)])
def test_sim_inflates_the_rtt_behind_long_lived_flows_by_the_links_queue(queue, extra_ms):
    """Behind 3 TCP flows the transfer's ramp runs at RTT 20 ms + the queue's delay: the FIFO's full
    queue (50 ms), or the fair queue's one turn per competing flow; behind three UDP streams leaving
    the same share (on both queues) at 20 ms."""
    from testbed.feasibility import slow_start_penalty_s
    from testbed.inputs import build_inputs
    from testbed.substrate.base import MigrationOrder
    from testbed.substrate.sim.substrate import SimSubstrate

    t = {}
    for name, cross in (("tcp", [{"tcp": {"flows": 3}}]), ("udp", [{"udp": {"rate_gbps": 0.25}}] * 3)):
        links = [{**BASE["links"][0], "queue": queue}, BASE["links"][1]]
        sc = scenario([{"src": "a", "dst": "b", **c} for c in cross], substrate={"io_model": "constant"}, links=links)
        sub = SimSubstrate(build_inputs(sc, 0))
        sub.start_migration(MigrationOrder("j", "a", "b", 10.0, 0.0))
        t[name] = sub.pending_outcomes()[0].transfer_s
        model = sub.describe()["cross_traffic"][0]
        assert model["src"] == "a" and (f"({queue}" in model["model"]) == (name == "tcp")
    # both leave 0.25 Gbit/s
    extra = slow_start_penalty_s(10e9, 0.25, 20.0 + extra_ms) - slow_start_penalty_s(10e9, 0.25, 20.0)
    assert t["tcp"] - t["udp"] == pytest.approx(extra, rel=1e-6, abs=1e-9)
    assert (t["tcp"] - t["udp"] > 0.05) == (queue == "fifo")
