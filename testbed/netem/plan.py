"""A fabric plan: the pure description of what one run builds (like Mininet's ``Topo``).

Addressing (all inside the run's own namespaces, never routed outside them):
- site i:        10.200.0.0 + i + 1 /32 on its loopback (the address transfers connect to);
- WAN link k:    10.201.0.0 + 4k /30, side a = .1, side b = .2;
- management:    10.202.0.0/16 on a bridge in ``tb-<run>-mgmt``; controller .0.1, site i = .0.0 + i + 2.
Routes between sites follow the shortest path by latency (multi-hop through site namespaces,
which forward), so any topology — mesh, star, line — is reachable.
"""

from __future__ import annotations

import heapq
import ipaddress
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

from testbed.netem.owned.naming import check_run_id, if_name, ns_name
from testbed.netem.tcp_cc import DEFAULT as DEFAULT_TCP_CC, NAME_RE
from testbed.link import rtt_ms
from testbed.spec.topology import QUEUES

SITE_NET = ipaddress.IPv4Address("10.200.0.0")
LINK_NET = ipaddress.IPv4Address("10.201.0.0")
MGMT_NET = ipaddress.IPv4Address("10.202.0.0")
MGMT_PREFIX = 16
MAX_SITES = 4000
MAX_LINKS = 16000

Impairment = Literal["none", "relay", "netem"]


class LinkEnd(NamedTuple):
    """One end of a planned link: the side's site, its WAN interface and address, and the rate it sends at."""

    side: str  # "a" or "b"
    site: str
    ifname: str
    addr: str
    rate_mbit: float


@dataclass(frozen=True)
class LinkPlan:
    index: int
    key: str  # "a-b"
    a: str
    b: str
    rate_ab_mbit: float
    rate_ba_mbit: float
    delay_ms: float  # one way, wall clock (after time scaling)
    jitter_ms: float
    loss_pct: float
    if_a: str  # WAN interface in a's namespace
    if_b: str
    addr_a: str
    addr_b: str
    relay_ns: str | None = None  # set when the link's delay/jitter/loss go through a relay
    if_ra: str | None = None  # relay-side interfaces
    if_rb: str | None = None
    queue: str = "fair"  # under the shaper: a per-flow fair queue (testbed.netem.fairq) or the tbf's fifo
    peak_mbit: float = 0.0  # the highest rate either direction is set to while the fabric is up (a replay's)

    @property
    def impaired(self) -> bool:
        return self.delay_ms > 0 or self.jitter_ms > 0 or self.loss_pct > 0

    def end(self, side: str) -> "LinkEnd":
        """The link's end ``side`` ("a" or "b"): its site, WAN interface, address and sending rate."""
        if side == "a":
            return LinkEnd("a", self.a, self.if_a, self.addr_a, self.rate_ab_mbit)
        if side == "b":
            return LinkEnd("b", self.b, self.if_b, self.addr_b, self.rate_ba_mbit)
        raise ValueError(f"a link's side is 'a' or 'b', got {side!r}")

    def end_at(self, site: str) -> "LinkEnd":
        """The link's end at ``site`` (a KeyError if the link does not join it)."""
        if site not in (self.a, self.b):
            raise KeyError(f"link {self.key} does not join {site}")
        return self.end("a" if site == self.a else "b")

    @property
    def rtt_ms(self) -> float:
        """Wall-clock round trip: the one-way delay each way."""
        return rtt_ms(self.delay_ms)


@dataclass(frozen=True)
class SitePlan:
    index: int
    name: str
    ns: str
    addr: str
    mgmt_if: str
    mgmt_peer_if: str
    mgmt_addr: str


@dataclass(frozen=True)
class FabricPlan:
    run_id: str
    sites: tuple[SitePlan, ...]
    links: tuple[LinkPlan, ...]
    impairment: Impairment
    mgmt_ns: str
    ctl_ns: str
    mgmt_bridge: str
    ctl_if: str
    ctl_peer_if: str
    ctl_addr: str
    routes: dict[str, tuple[tuple[str, str, str], ...]] = field(default_factory=dict)
    """site -> ((destination site address, next-hop address, out interface), ...)"""
    tcp_congestion: str = DEFAULT_TCP_CC
    """the sites' TCP congestion control (:mod:`testbed.netem.tcp_cc`; ``host``: the machine's default)"""
    cross_traffic: tuple = ()
    """background traffic the fabric generates while it is up (:class:`testbed.netem.crosstraffic.XtPlan`)"""

    def site(self, name: str) -> SitePlan:
        for s in self.sites:
            if s.name == name:
                return s
        raise KeyError(name)

    def link(self, a: str, b: str) -> LinkPlan:
        for link in self.links:
            if {link.a, link.b} == {a, b}:
                return link
        raise KeyError(f"{a}-{b}")

    def namespaces(self) -> list[str]:
        relays = [link.relay_ns for link in self.links if link.relay_ns]
        return [s.ns for s in self.sites] + relays + [self.mgmt_ns, self.ctl_ns]


@dataclass(frozen=True)
class LinkInput:
    """A link as the plan needs it: wall-clock rates and impairments."""

    a: str
    b: str
    rate_ab_mbit: float
    rate_ba_mbit: float
    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    loss_pct: float = 0.0
    queue: str = "fair"  # testbed.netem.fairq
    peak_mbit: float = 0.0  # the highest rate either direction will be set to (a run's bandwidth traces)


def _shortest_paths(sites: list[str], links: list[LinkPlan]) -> dict[str, dict[str, LinkPlan]]:
    """For every source site, the first link on a minimum-latency path to each other site."""
    adj: dict[str, list[tuple[float, str, LinkPlan]]] = {s: [] for s in sites}
    for link in links:
        cost = max(link.delay_ms, 0.0) + 1e-3  # hop count breaks latency ties
        adj[link.a].append((cost, link.b, link))
        adj[link.b].append((cost, link.a, link))
    first_hop: dict[str, dict[str, LinkPlan]] = {}
    for src in sites:
        dist = {src: 0.0}
        hop: dict[str, LinkPlan] = {}
        heap: list[tuple[float, str, str]] = [(0.0, src, "")]
        while heap:
            d, node, _ = heapq.heappop(heap)
            if d > dist.get(node, float("inf")):
                continue
            for cost, nxt, link in sorted(adj[node], key=lambda x: (x[0], x[1])):
                nd = d + cost
                if nd < dist.get(nxt, float("inf")):
                    dist[nxt] = nd
                    hop[nxt] = link if node == src else hop[node]
                    heapq.heappush(heap, (nd, nxt, node))
        first_hop[src] = hop
    return first_hop


def plan_fabric(run_id: str, sites: list[str], links: list[LinkInput], impairment: Impairment, *,
                tcp_congestion: str = DEFAULT_TCP_CC) -> FabricPlan:
    check_run_id(run_id)
    if not NAME_RE.match(tcp_congestion):
        raise ValueError(f"tcp_congestion {tcp_congestion!r} is not a congestion control name")
    if not 0 < len(sites) <= MAX_SITES:
        raise ValueError(f"between 1 and {MAX_SITES} sites, got {len(sites)}")
    if len(links) > MAX_LINKS:
        raise ValueError(f"at most {MAX_LINKS} links, got {len(links)}")
    site_plans = tuple(
        SitePlan(
            index=i, name=s, ns=ns_name(run_id, f"s-{s}"), addr=str(SITE_NET + i + 1),
            mgmt_if=if_name(run_id, f"m{i}s"), mgmt_peer_if=if_name(run_id, f"m{i}b"),
            mgmt_addr=str(MGMT_NET + i + 2),
        )
        for i, s in enumerate(sites)
    )
    link_plans = []
    for k, li in enumerate(links):
        if li.queue not in QUEUES:
            raise ValueError(f"link {li.a}-{li.b}: queue {li.queue!r} is not one of {', '.join(QUEUES)}")
        base = LINK_NET + 4 * k
        impaired = li.delay_ms > 0 or li.jitter_ms > 0 or li.loss_pct > 0
        relay = impairment == "relay" and impaired
        link_plans.append(LinkPlan(
            index=k, key=f"{li.a}-{li.b}", a=li.a, b=li.b, rate_ab_mbit=li.rate_ab_mbit, rate_ba_mbit=li.rate_ba_mbit,
            delay_ms=li.delay_ms, jitter_ms=li.jitter_ms, loss_pct=li.loss_pct,
            if_a=if_name(run_id, f"w{k}a"), if_b=if_name(run_id, f"w{k}b"),
            addr_a=str(base + 1), addr_b=str(base + 2),
            relay_ns=ns_name(run_id, f"r{k}") if relay else None,
            if_ra=if_name(run_id, f"w{k}x") if relay else None,
            if_rb=if_name(run_id, f"w{k}y") if relay else None, queue=li.queue, peak_mbit=li.peak_mbit,
        ))
    hops = _shortest_paths(sites, link_plans)
    addr = {s.name: s.addr for s in site_plans}
    routes = {}
    for src in sites:
        rows = []
        for dst, link in sorted(hops[src].items()):
            here = link.end_at(src)
            rows.append((addr[dst], link.end("b" if here.side == "a" else "a").addr, here.ifname))
        routes[src] = tuple(rows)
    return FabricPlan(
        run_id=run_id, sites=site_plans, links=tuple(link_plans), impairment=impairment,
        mgmt_ns=ns_name(run_id, "mgmt"), ctl_ns=ns_name(run_id, "ctl"), mgmt_bridge=if_name(run_id, "br"),
        ctl_if=if_name(run_id, "mcs"), ctl_peer_if=if_name(run_id, "mcb"), ctl_addr=str(MGMT_NET + 1),
        routes=routes, tcp_congestion=tcp_congestion,
    )


def unreachable(plan: FabricPlan) -> list[tuple[str, str]]:
    """Pairs of sites with no path between them (an error for substrates that need full reachability)."""
    missing = []
    for s in plan.sites:
        reach = {r[0] for r in plan.routes[s.name]}
        for t in plan.sites:
            if t.name != s.name and t.addr not in reach:
                missing.append((s.name, t.name))
    return missing
