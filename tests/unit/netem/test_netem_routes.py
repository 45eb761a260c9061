"""Route aggregation (testbed.netem.routes): same forwarding for every site, far fewer routes."""

from __future__ import annotations

import ipaddress
import random

from testbed.netem.plan import LinkInput, plan_fabric
from testbed.netem.routes import aggregate, collapse


def _lookup(table: list[tuple[str, str, str]], addr: str) -> tuple[str, str] | None:
    """Longest-prefix match, as the kernel's main table does it."""
    a = ipaddress.IPv4Address(addr)
    best = None
    for dst, via, ifname in table:
        net = ipaddress.IPv4Network(dst)
        if a in net and (best is None or net.prefixlen > best[0].prefixlen):
            best = (net, via, ifname)
    return None if best is None else best[1:]


def _assert_equivalent(plan) -> int:
    """Every site address forwards as the /32 list says, unknown addresses stay unroutable."""
    total = 0
    probes = [str(ipaddress.IPv4Address("10.200.0.0") + i) for i in range(0, len(plan.sites) + 40)]
    for s in plan.sites:
        want = {dst: (via, ifname) for dst, via, ifname in plan.routes[s.name]}
        got = aggregate(plan.routes[s.name], s.addr)
        total += len(got)
        for addr in probes:
            if addr == s.addr:
                continue  # local: the kernel's local table answers before main
            assert _lookup(got, addr) == want.get(addr), (s.name, addr)
    return total


def test_star_collapses_to_a_few_blocks_per_leaf():
    sites = ["hub"] + [f"s{i}" for i in range(100)]
    plan = plan_fabric("abc123", sites, [LinkInput("hub", s, 100, 100, 5) for s in sites[1:]], "none")
    total = _assert_equivalent(plan)
    assert sum(len(r) for r in plan.routes.values()) == 101 * 100
    assert total < 101 * 100 / 5  # the hub keeps 100 routes; each leaf needs < 10 blocks
    leaf = plan.site("s42")
    assert len(aggregate(plan.routes["s42"], leaf.addr)) <= 9


def test_line_mesh_and_islands_keep_their_forwarding():
    rng = random.Random(3)
    names = [f"n{i}" for i in range(23)]
    links = [LinkInput(names[i], names[i + 1], 10, 10, 1 + i % 4) for i in range(20)]  # a line, 2 islands
    links += [LinkInput(rng.choice(names[:21]), rng.choice(names[:21]), 10, 10, rng.uniform(1, 9))
              for _ in range(15)]
    links = [lk for lk in links if lk.a != lk.b]
    seen, uniq = set(), []
    for lk in links:
        if frozenset((lk.a, lk.b)) not in seen:
            seen.add(frozenset((lk.a, lk.b)))
            uniq.append(lk)
    plan = plan_fabric("abc123", names, uniq, "none")
    _assert_equivalent(plan)


def test_without_own_address_and_empty():
    assert aggregate([]) == []
    routes = [("10.200.0.2", "10.201.0.2", "w0"), ("10.200.0.3", "10.201.0.2", "w0")]
    assert aggregate(routes) == [("10.200.0.2/31", "10.201.0.2", "w0")]
    # the own address is used only where it merges blocks: .1 does not (.0 is no site's)...
    assert aggregate(routes, "10.200.0.1") == [("10.200.0.2/31", "10.201.0.2", "w0")]
    # ...but .4 fills the hole between .5 and .6/31: one /30 instead of two blocks
    routes = [("10.200.0.5", "10.201.0.2", "w0"), ("10.200.0.6", "10.201.0.2", "w0"),
              ("10.200.0.7", "10.201.0.2", "w0"), ("10.200.0.9", "10.201.0.6", "w1")]
    assert aggregate(routes, "10.200.0.4") == [("10.200.0.4/30", "10.201.0.2", "w0"),
                                               ("10.200.0.9/32", "10.201.0.6", "w1")]


def test_collapse_matches_the_standard_library():
    rng = random.Random(7)
    for _ in range(200):
        base = rng.choice([0, 2**31, int(ipaddress.IPv4Address("10.200.0.0"))])
        addrs = {base + rng.randrange(300) for _ in range(rng.randrange(1, 120))}
        want = [(int(n.network_address), n.prefixlen)
                for n in ipaddress.collapse_addresses(ipaddress.IPv4Address(a) for a in addrs)]
        assert collapse(addrs) == want
    assert collapse(set()) == []
    assert collapse({0, 1, 2, 3}) == [(0, 30)]
