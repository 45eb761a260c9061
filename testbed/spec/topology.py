"""Sites, links and node types: the declarative graph a scenario runs on (like Mininet's ``Topo``).

A topology only *records* sites and links; substrates replay it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal, Sequence, get_args

from testbed.link import DirectedLink
from testbed.spec.base import Strict
from testbed.spec.geo import fibre_latency_ms, great_circle_km
from pydantic import Field, StringConstraints, model_validator

SiteName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,14}$")]
"""Lower-case, short (interface names are built from it: ``tb-<run>-<site>``)."""


class NodeType(Strict):
    """Power and performance profile of one node (one accelerator per node, as in the migration paper)."""

    p_active_kw: float = Field(gt=0, description="Wall power while training (the migration paper: P_node = 0.75 kW).")
    p_idle_kw: float = Field(ge=0, description="Wall power while idle.")
    speed: float = Field(1.0, gt=0, description="GPU-hours of work done per hour (1.0 = reference GPU).")
    source: str = Field("", description="Where these numbers come from.")
    power_profile: str | None = Field(
        None, description="GPU power/performance profile: a shipped name (rtx4090, a100-sxm4, jetson-thor, h200-sxm) "
        "or a YAML file (see `testbed calibrate power`); None = throughput proportional to power above idle.",
    )

    @model_validator(mode="after")
    def _idle_below_active(self) -> "NodeType":
        if self.p_idle_kw > self.p_active_kw:
            raise ValueError("p_idle_kw must be <= p_active_kw")
        return self


BUILTIN_NODE_TYPES: dict[str, NodeType] = {
    "rtx4090-minipc": NodeType(
        p_active_kw=0.75,
        p_idle_kw=0.08,
        speed=1.0,
        source="seed 2511.16182 P_node = 0.75 kW (RTX 4090 mini-PC 0.6-0.9 kW, Table I); idle: our estimate",
        power_profile="rtx4090",
    ),
    "jetson-thor": NodeType(
        p_active_kw=0.13,
        p_idle_kw=0.02,
        speed=0.35,
        source="seed 2511.16182 ref. [5]-[7]: 40-130 W module envelope; speed: our estimate vs RTX 4090",
        power_profile="jetson-thor",
    ),
    "a100-server": NodeType(
        p_active_kw=0.65,
        p_idle_kw=0.1,
        speed=1.6,
        source="A100 SXM 400 W TDP + host share; speed: our estimate vs RTX 4090",
        power_profile="a100-sxm4",
    ),
}


class Site(Strict):
    name: SiteName = Field(description="Unique site name; links, traces and jobs refer to it.")
    lat_deg: float = Field(ge=-90, le=90, description="Latitude in degrees (solar traces and distance-based latency use it).")
    lon_deg: float = Field(ge=-180, le=180, description="Longitude in degrees (solar traces and distance-based latency use it).")
    node_type: str = Field("rtx4090-minipc", description="Node type of the site's GPU nodes: a built-in name or one from node_types.")
    nodes: int = Field(1, ge=1, le=4096, description="Number of GPU nodes at the site (each runs one job at a time).")
    grid_limit_kw: float | None = Field(
        None, ge=0, description="Grid power the site can draw (default: the scenario's power.grid_limit_kw)."
    )
    utc_offset_h: float | None = Field(
        None, ge=-12, le=14, description="Local time offset; default lon_deg/15 (solar time)."
    )

    @property
    def local_offset_h(self) -> float:
        return self.utc_offset_h if self.utc_offset_h is not None else self.lon_deg / 15.0


LinkQueue = Literal["fair", "fifo"]
QUEUES: tuple[str, ...] = get_args(LinkQueue)
"""A link's queue: ``fair`` (a per-flow fair queue, the default) or ``fifo`` (one drop-tail queue)."""


class Link(Strict):
    """A wide-area link between two sites. Bandwidth is per direction."""

    a: SiteName = Field(description="Site at one end of the link.")
    b: SiteName = Field(description="Site at the other end of the link.")
    bandwidth_gbps: float = Field(gt=0, description="Link bandwidth in Gbit/s, per direction (a to b; also b to a unless bandwidth_b_to_a_gbps is set).")
    bandwidth_b_to_a_gbps: float | None = Field(None, gt=0, description="Asymmetric reverse rate; default = bandwidth_gbps.")
    latency_ms: float | None = Field(
        None, ge=0, description="One-way delay; default: great-circle distance x route factor x 5 us/km + base."
    )
    jitter_ms: float = Field(0.0, ge=0, description="Delay variation in ms added on the link (emulation: netem or the delay relay).")
    loss_pct: float = Field(0.0, ge=0, le=100, description="Packet loss in percent on the link (emulation: netem or the delay relay).")
    queue: LinkQueue = Field(
        "fair", description="The link's queue, per direction: fair (each flow with packets waiting gets an equal share "
                            "of the rate: a per-flow fair queue) or fifo (one drop-tail queue). Emulation builds it; "
                            "the sim's model of cross-traffic follows it.")

    @model_validator(mode="after")
    def _distinct_ends(self) -> "Link":
        if self.a == self.b:
            raise ValueError(f"a link needs two different sites (both are {self.a!r})")
        return self

    @property
    def key(self) -> str:
        return f"{self.a}-{self.b}"

    def directed_bandwidth_gbps(self, src: str, dst: str) -> float:
        if (src, dst) == (self.a, self.b):
            return self.bandwidth_gbps
        if (src, dst) == (self.b, self.a):
            return self.bandwidth_b_to_a_gbps or self.bandwidth_gbps
        raise KeyError(f"link {self.key} does not join {src} and {dst}")


def link_latency_ms(link: Link, sites: dict[str, Site]) -> float:
    """The link's one-way latency: as given, else from the great-circle distance of its ends."""
    if link.latency_ms is not None:
        return link.latency_ms
    a, b = sites[link.a], sites[link.b]
    return fibre_latency_ms(great_circle_km(a.lat_deg, a.lon_deg, b.lat_deg, b.lon_deg))


def directed_links(sites: Sequence[Site], links: Sequence[Link]) -> list[DirectedLink]:
    """Both directions of every link (a -> b, then b -> a), in link order: bandwidth per direction
    (``bandwidth_b_to_a_gbps`` for b -> a, default ``bandwidth_gbps``), the link's one-way latency
    (given, else from the distance of its ends), jitter and loss."""
    by_name = {s.name: s for s in sites}
    out = []
    for link in links:
        latency = link_latency_ms(link, by_name)
        for src, dst in ((link.a, link.b), (link.b, link.a)):
            out.append(DirectedLink(src, dst, link.directed_bandwidth_gbps(src, dst), latency, link.jitter_ms, link.loss_pct,
                                    link.queue))
    return out


class Topology(Strict):
    name: str = Field("", description="Name of the topology (free text).")
    description: str = Field("", description="Free text about the topology.")
    sites: list[Site] = Field(min_length=1, description="The sites of the topology.")
    links: list[Link] = Field(default_factory=list, description="The wide-area links between the sites.")


def read_topology(path: Path) -> Topology:
    """The one reader of topology files: parsed by the hardened loader, validated; every problem a
    SpecError ``FILE: field: message`` (values not quoted: the file may not be the user's own)."""
    from testbed.errors import SpecError
    from testbed.spec.kinds import wrong_kind
    from testbed.spec.load import read_yaml

    data = read_yaml(path, "topology file")
    why = wrong_kind(data, path, "topology")
    if why is not None:
        raise SpecError([(str(path), why)])
    return _topology_from(data, path)


def _topology_from(raw: object, path: Path) -> Topology:
    from pydantic import ValidationError

    from testbed.errors import SpecError
    from testbed.spec.errors_format import problems_from

    try:
        return Topology.model_validate(raw)
    except ValidationError as e:
        raise SpecError([(f"{path}: {p}", m) for p, m in problems_from(e, frozenset(), quote_values=False)]) from None


def read_sites_and_links(path: Path) -> tuple[list[Site], list[Link]]:
    """Sites and links of a scenario file (it has ``traces``; loaded in full, its topology file merged)
    or of a topology file: what ``testbed net up`` and ``testbed bench`` build."""
    from testbed.errors import SpecError
    from testbed.spec.kinds import wrong_kind
    from testbed.spec.load import read_yaml, scenario_from_dict

    data = read_yaml(path, "file")
    why = wrong_kind(data, path, "topology", accepted=("scenario",))
    if why is not None:
        raise SpecError([(str(path), why)])
    if "traces" in data:
        sc = scenario_from_dict(data, path.resolve().parent, trim=False)
        return list(sc.sites), list(sc.links)
    topo = _topology_from(data, path)
    return list(topo.sites), list(topo.links)
