"""The directed-link value object and the one link builder: pure, no privileges."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed.errors import SpecError
from testbed.netem.links import fabric_links, file_links
from testbed.netem.scaling import Scaling, choose_scaling
from testbed.spec import scenario_from_dict
from testbed.link import DirectedLink, rtt_ms
from testbed.spec.topology import Link, Site, directed_links, link_latency_ms, read_topology
from tests.conftest import ROOT, small_scenario_dict

SITES = [Site(name="a", lat_deg=45.0, lon_deg=9.0), Site(name="b", lat_deg=48.0, lon_deg=2.0),
         Site(name="c", lat_deg=52.0, lon_deg=13.0)]


def test_rtt_is_twice_the_one_way_latency():
    assert rtt_ms(12.5) == 25.0 and rtt_ms(0.0) == 0.0
    link = DirectedLink("a", "b", bandwidth_gbps=10.0, latency_ms=7.0)
    assert link.rtt_ms == 14.0 and link.key == ("a", "b")


def test_directed_links_give_both_directions_with_their_own_rates():
    links = [Link(a="a", b="b", bandwidth_gbps=10, bandwidth_b_to_a_gbps=2, latency_ms=5, jitter_ms=1, loss_pct=0.5),
             Link(a="b", b="c", bandwidth_gbps=3)]
    got = directed_links(SITES, links)
    assert [d.key for d in got] == [("a", "b"), ("b", "a"), ("b", "c"), ("c", "b")]
    ab, ba, bc, cb = got
    assert (ab.bandwidth_gbps, ba.bandwidth_gbps) == (10, 2)
    assert ab.latency_ms == ba.latency_ms == 5 and ab.jitter_ms == 1 and ba.loss_pct == 0.5
    assert bc.bandwidth_gbps == cb.bandwidth_gbps == 3
    # no latency given: the distance of the ends, the same as every other consumer computes
    assert bc.latency_ms == link_latency_ms(links[1], {s.name: s for s in SITES}) > 0


def test_fabric_links_pair_directions_and_scale_the_same_inputs():
    links = [Link(a="a", b="b", bandwidth_gbps=10, bandwidth_b_to_a_gbps=2, latency_ms=40, jitter_ms=4, loss_pct=1)]
    directed = directed_links(SITES, links)
    real = fabric_links(directed)  # unscaled: what `testbed net up` builds
    assert len(real) == 1
    li = real[0]
    assert (li.a, li.b, li.rate_ab_mbit, li.rate_ba_mbit) == ("a", "b", 10_000, 2_000)
    assert (li.delay_ms, li.jitter_ms, li.loss_pct) == (40, 4, 1)
    s = Scaling(time_scale=100.0, byte_scale=0.01, capacity_mbit=1e9, byte_scale_source="scenario")
    wall = fabric_links(directed, s)[0]
    assert wall.rate_ab_mbit == pytest.approx(10_000) and wall.rate_ba_mbit == pytest.approx(2_000)
    assert wall.delay_ms == pytest.approx(0.4) and wall.jitter_ms == pytest.approx(0.04) and wall.loss_pct == 1
    # a run's t = 0 trace values replace the nominal rates; impaired=False keeps only the rates
    start = fabric_links(directed, s, start_gbps={("a", "b"): 5.0, ("b", "a"): 1.0}, impaired=False)[0]
    assert start.rate_ab_mbit == pytest.approx(5_000) and start.rate_ba_mbit == pytest.approx(1_000)
    assert (start.delay_ms, start.jitter_ms, start.loss_pct) == (0, 0, 0)
    with pytest.raises(ValueError, match="no direction b -> a"):
        fabric_links(directed[:1])


def test_scaling_comes_from_the_links_that_are_shaped():
    sc = scenario_from_dict(small_scenario_dict(emulation={"time_scale": 100}))
    directed = directed_links(sc.sites, sc.links)
    assert choose_scaling(sc, capacity_mbit=500, links=directed) == choose_scaling(sc, capacity_mbit=500)
    # the fastest link the fabric is built from sets byte_scale: twice as fast, half the scale
    faster = [DirectedLink(d.src, d.dst, d.bandwidth_gbps * 2, d.latency_ms) for d in directed]
    s1, s2 = choose_scaling(sc, capacity_mbit=500, links=directed), choose_scaling(sc, capacity_mbit=500, links=faster)
    assert s2.byte_scale == pytest.approx(s1.byte_scale / 2)
    fastest = max(li.rate_ab_mbit for li in fabric_links(faster, s2))
    assert fastest == pytest.approx(500)  # exactly the capacity the scale was chosen for


def test_topology_files_are_read_by_one_function(tmp_path):
    topo = read_topology(ROOT / "topologies" / "eu-5.yaml")
    names, links = file_links(ROOT / "topologies" / "eu-5.yaml")
    assert names == [s.name for s in topo.sites] and len(links) == len(topo.links)
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nsites:\n  - {name: a, lat_deg: 100, lon_deg: 0}\n")
    with pytest.raises(SpecError) as e:
        read_topology(bad)
    where, _ = e.value.problems[0]
    assert where.startswith(f"{bad}: sites") and "lat_deg" in where


def _testbed_sources():
    import testbed

    root = Path(testbed.__file__).resolve().parent
    for path in sorted(root.rglob("*.py")):
        yield path.relative_to(root.parent).as_posix(), path.read_text(encoding="utf-8")


def test_one_place_each_for_rtt_link_building_and_topology_reading():
    """RTT = 2 x latency only in testbed/link.py; fabric links made only by netem/links.py;
    topology files validated only by spec/topology.py."""
    import ast

    doubled, built, validated = [], [], []
    for rel, text in _testbed_sources():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
                sides = (node.left, node.right)
                if any(isinstance(s, ast.Constant) and s.value == 2 for s in sides):
                    other = ast.unparse(node.right if isinstance(node.left, ast.Constant) else node.left)
                    if "latency" in other or "delay_ms" in other:  # not a retry's backoff delay
                        doubled.append(f"{rel}:{node.lineno} {ast.unparse(node)}")
            elif isinstance(node, ast.Call):
                name = ast.unparse(node.func)
                if name.endswith("LinkInput"):
                    built.append(rel)
                elif name == "Topology.model_validate":
                    validated.append(rel)
    assert [d.split(":")[0] for d in doubled] == ["testbed/link.py"], doubled
    assert set(built) == {"testbed/netem/links.py"}, built
    assert set(validated) == {"testbed/spec/topology.py"}, validated


def test_a_run_scales_and_shapes_the_same_directed_links():
    from testbed.inputs import build_inputs
    from testbed.netem.links import scaled_links

    sc = scenario_from_dict(small_scenario_dict(emulation={"time_scale": 100}))
    inputs = build_inputs(sc)
    scaling, links = scaled_links(inputs, capacity_mbit=500)
    assert scaling == choose_scaling(sc, capacity_mbit=500, links=directed_links(sc.sites, sc.links))
    assert len(links) == len(sc.links)
    for li, link in zip(links, sc.links):
        assert li.rate_ab_mbit == scaling.rate_mbit(inputs.bandwidth_gbps[(link.a, link.b)].at(0.0))
        assert li.rate_ba_mbit == scaling.rate_mbit(inputs.bandwidth_gbps[(link.b, link.a)].at(0.0))
        assert li.delay_ms == scaling.delay_ms(inputs.latency_ms[(link.a, link.b)])
    _, bare = scaled_links(inputs, capacity_mbit=500, impaired=False)
    assert all(li.delay_ms == li.jitter_ms == li.loss_pct == 0 for li in bare)


def test_a_link_whose_trace_rises_past_frame_mode_gets_the_relays_gso_mode():
    """The relay's mode is chosen for every rate a run's replay will set, not only the first: a link
    built under 400 Mbit/s on the wire whose bandwidth trace rises past it gets GSO mode (in frame mode it
    stalled for tens of seconds under heavy cross-traffic); a link that stays under 400 keeps frame mode."""
    from testbed.inputs import build_inputs
    from testbed.netem.fabric import RELAY_GSO_ABOVE_MBIT, relay_gso
    from testbed.netem.links import scaled_links
    from testbed.netem.plan import plan_fabric

    def plan(cv: float, gbps: float):
        d = small_scenario_dict(duration_h=48)
        d["links"][0].update(bandwidth_gbps=gbps, latency_ms=5.0)
        d["traces"]["bandwidth"] = {"default": {"kind": "variance", "cv": cv, "corr_s": 600}}
        d["emulation"] = {"time_scale": 200, "byte_scale": 0.002}  # 1 Gbit/s -> 400 Mbit/s on the wire
        inputs = build_inputs(scenario_from_dict(d), 7)
        _, links = scaled_links(inputs, capacity_mbit=5000)
        return inputs, plan_fabric("abc123", ["a", "b"], links, "relay").links[0]

    inputs, link = plan(0.05, 0.95)  # seed 7: 396 and 348 Mbit/s at t = 0, up to 433 and 441
    traces = [inputs.bandwidth_gbps[k] for k in (("a", "b"), ("b", "a"))]
    assert max(link.rate_ab_mbit, link.rate_ba_mbit) <= RELAY_GSO_ABOVE_MBIT  # frame mode by the first rates
    assert link.peak_mbit == pytest.approx(400 * max(float(max(t.values)) for t in traces))
    assert link.peak_mbit > RELAY_GSO_ABOVE_MBIT and relay_gso(link)
    _, steady = plan(0.0, 0.9)  # 360 Mbit/s, never more
    assert steady.peak_mbit == pytest.approx(360) and not relay_gso(steady)
