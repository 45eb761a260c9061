"""The shipped topologies: they validate, are connected, have sensible derived latencies, load in a
scenario, translate to a Mininet graph, and us-100 is exactly what its generator writes."""

from __future__ import annotations

import importlib.util
import re

import pytest
import yaml

from testbed.spec import scenario_from_dict
from testbed.spec.geo import fibre_latency_ms, great_circle_km
from testbed.spec.mininet_topo import link_plan, to_mininet_topo
from testbed.spec.topology import BUILTIN_NODE_TYPES, Link, Site, Topology, link_latency_ms
from testbed.spec.topology_build import graph_problems, render_yaml, stable_choice
from tests.conftest import ROOT, small_scenario_dict

TOPOLOGIES = ROOT / "topologies"
NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,14}$")


def load(name: str) -> Topology:
    with open(TOPOLOGIES / f"{name}.yaml", encoding="utf-8") as f:
        return Topology.model_validate(yaml.safe_load(f))


def generator():
    spec = importlib.util.spec_from_file_location("make_topologies", TOPOLOGIES / "make_topologies.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("name", "n_sites", "n_links"), [("eu-5", 5, 10), ("us-100", 101, 100), ("global-7", 7, 21)])
def test_shipped_topology_is_valid_and_connected(name, n_sites, n_links):
    topo = load(name)
    assert topo.name == name
    assert (len(topo.sites), len(topo.links)) == (n_sites, n_links)
    assert graph_problems(topo) == []
    assert all(NAME_RE.match(s.name) for s in topo.sites)
    assert all(s.node_type in BUILTIN_NODE_TYPES for s in topo.sites)
    assert all(1 <= link.directed_bandwidth_gbps(a, b) <= 10 for link in topo.links for a, b in [(link.a, link.b), (link.b, link.a)])


@pytest.mark.parametrize("name", ["us-100", "global-7"])
def test_topology_loads_in_a_scenario(name):
    d = small_scenario_dict()
    del d["sites"], d["links"]
    d["topology"] = str(TOPOLOGIES / f"{name}.yaml")
    first = load(name).sites[1].name
    d["workloads"]["jobs"] = [{"checkpoint_gb": 10, "work_gpu_h": 1, "origin": first}]
    sc = scenario_from_dict(d)  # the scenario's cross-checks: unique names, known ends, no duplicate links
    assert len(sc.sites) == len(load(name).sites)


def test_us100_is_a_star_around_the_aggregator():
    topo = load("us-100")
    assert topo.sites[0].name == "agg"
    assert all(link.b == "agg" for link in topo.links)
    assert sorted(link.a for link in topo.links) == sorted(s.name for s in topo.sites[1:])
    assert all(4 <= s.nodes <= 8 for s in topo.sites)
    rates = {link.a: (link.directed_bandwidth_gbps(link.a, "agg"), link.directed_bandwidth_gbps("agg", link.a)) for link in topo.links}
    assert rates["newyork"] == (10, 10)  # metro
    assert set(rates.values()) == {(10, 10), (2.5, 2.5), (5, 5), (1, 2.5), (2.5, 5)}
    assert all(up <= down for up, down in rates.values())  # uplink (updates) never above downlink


def test_us100_latencies_follow_distance():
    topo = load("us-100")
    sites = {s.name: s for s in topo.sites}
    latency = {link.a: link_latency_ms(link, sites) for link in topo.links}
    assert min(latency, key=latency.get) in {"omaha", "wichita", "tulsa", "lincoln"}
    assert max(latency, key=latency.get) == "honolulu"
    assert 12 < latency["newyork"] < 15  # ~1760 km: 0.5 ms + 1760 km * 1.5 * 5 us/km = 13.7 ms
    assert 40 < latency["honolulu"] < 55


def test_us100_is_exactly_what_the_generator_writes():
    gen = generator()
    assert gen.render() == (TOPOLOGIES / "us-100.yaml").read_text(encoding="utf-8")
    assert len(gen.CITIES) == 100 and len({c[0] for c in gen.CITIES}) == 100
    assert "kansascity" not in {c[0] for c in gen.CITIES}  # it hosts the aggregator


def test_generator_check_mode(tmp_path, capsys):
    gen = generator()
    out = tmp_path / "us-100.yaml"
    assert gen.main(["--check", "--out", str(out)]) == 1
    assert gen.main(["--out", str(out)]) == 0
    assert gen.main(["--check", "--out", str(out)]) == 0


def test_global7_latencies():
    topo = load("global-7")
    sites = {s.name: s for s in topo.sites}
    by_pair = {frozenset((link.a, link.b)): link_latency_ms(link, sites) for link in topo.links}
    assert by_pair[frozenset(("virginia", "sydney"))] > 100
    assert by_pair[frozenset(("virginia", "oregon"))] < 40
    assert by_pair[frozenset(("mumbai", "singapore"))] < by_pair[frozenset(("mumbai", "sydney"))]


def test_latency_model_at_100_km():
    assert fibre_latency_ms(100) == pytest.approx(1.25)
    a = Site(name="a", lat_deg=45.0, lon_deg=9.0)
    b = Site(name="b", lat_deg=45.0 + 100 / 111.195, lon_deg=9.0)  # 100 km due north
    assert great_circle_km(a.lat_deg, a.lon_deg, b.lat_deg, b.lon_deg) == pytest.approx(100, rel=1e-3)
    link = Link(a="a", b="b", bandwidth_gbps=1)
    assert link_latency_ms(link, {"a": a, "b": b}) == pytest.approx(1.25, abs=0.01)
    assert link_latency_ms(link.model_copy(update={"latency_ms": 7.0}), {"a": a, "b": b}) == 7.0


def test_graph_problems_are_found():
    topo = Topology(sites=[Site(name="a", lat_deg=0, lon_deg=0), Site(name="b", lat_deg=0, lon_deg=1),
                           Site(name="c", lat_deg=0, lon_deg=2), Site(name="a", lat_deg=0, lon_deg=3)],
                    links=[Link(a="a", b="b", bandwidth_gbps=1), Link(a="b", b="a", bandwidth_gbps=1),
                           Link(a="a", b="z", bandwidth_gbps=1)])
    assert graph_problems(topo) == ["duplicate site 'a'", "links[1]: duplicate link b-a", "links[2]: unknown site 'z'",
                                    "site 'c' is not connected to 'a'"]


def test_stable_choice_is_stable():
    assert stable_choice(1, "x", "abc") == stable_choice(1, "x", "abc")
    # Pinned: a change here would silently change us-100.yaml (the byte-for-byte test would also fail).
    assert [stable_choice(250717904, f"s{i}", (0, 1, 2, 3)) for i in range(8)] == [3, 1, 0, 3, 3, 3, 1, 3]


def test_render_yaml_round_trips():
    topo = load("global-7")
    again = Topology.model_validate(yaml.safe_load(render_yaml(topo, ["header"])))
    assert again == topo


# -- Mininet ---------------------------------------------------------------------------------------

def test_link_plan_is_per_direction_in_mbit_and_ms():
    topo = load("us-100")
    plan = {(p.a, p.b): p for p in link_plan(topo, intf_prefix="tbabc123")}
    link = next(k for k in topo.links if k.bandwidth_b_to_a_gbps)
    sites = {s.name: s for s in topo.sites}
    p = plan[(link.a, link.b)]
    assert p.opts["params1"]["bw"] == link.bandwidth_gbps * 1000
    assert p.opts["params2"]["bw"] == link.bandwidth_b_to_a_gbps * 1000
    delay = f"{link_latency_ms(link, sites):.3f}ms"
    assert p.opts["params1"]["delay"] == p.opts["params2"]["delay"] == delay
    names = [n for q in plan.values() for n in (q.opts["intfName1"], q.opts["intfName2"])]
    assert len(set(names)) == len(names) and max(map(len, names)) <= 15 and names[0] == "tbabc123w0a"
    assert "jitter" not in p.opts["params1"] and "loss" not in p.opts["params1"]


def test_link_plan_refuses_names_over_15_characters():
    with pytest.raises(ValueError, match="longer than 15"):
        link_plan(load("us-100"), intf_prefix="tbabc123xxxx")


def test_to_mininet_topo():
    pytest.importorskip("mininet.topo", reason="Mininet is not installed (pip install mininet==2.3.0.dev6)")
    from mininet.link import TCLink

    topo_spec = load("global-7")
    topo = to_mininet_topo(topo_spec, intf_prefix="tbabc123")
    assert topo.hosts() == sorted(s.name for s in topo_spec.sites)
    assert topo.switches() == []
    assert len(topo.links()) == 21
    info = topo.linkInfo("virginia", "sydney")
    assert info["cls"] is TCLink
    assert info["params1"]["bw"] == 2500 and float(info["params1"]["delay"].removesuffix("ms")) > 100
