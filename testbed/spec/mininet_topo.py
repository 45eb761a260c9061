"""A :class:`~testbed.spec.topology.Topology` as a Mininet ``Topo``: a pure graph translation.

One host per site, named by the site, and one direct host-to-host link per topology link, so
each link is one veth pair (no switches: a site with several links has several interfaces, as in
the netns substrate). Link parameters follow Mininet's ``TCLink``, one dict per direction:
``params1`` shapes the egress of the ``a`` end (traffic a -> b), ``params2`` that of ``b``:

* ``bw``: Mbit/s (1 Gbit/s = 1000). Mininet ignores ``bw`` above ``TCIntf.bwParamMax`` (1000 by
  default) unless the runtime raises it: that is the substrate's job, not the graph's;
* ``delay``: the one-way latency as ``"X.XXXms"``, on both ends (RTT = 2 x latency); ``jitter``
  likewise; ``loss``: percent, on each direction. Without netem Mininet drops ``delay=`` with only an
  error message, so the runtime must route delay through the relay or refuse (``testbed doctor``).

Interface names are given explicitly (Mininet's ``<node>-eth<N>`` exceeds 15 characters for long
site names): ``<prefix>w<k>a`` / ``<prefix>w<k>b`` for link ``k``; a runtime passes its run's
prefix (``testbed.netem.owned.naming.if_prefix(run_id)``, i.e. ``tb<run>``) so that its interfaces are
labelled; this layer does not import it (spec imports nothing live). :func:`link_plan` is the translation itself and needs no Mininet;
:func:`to_mininet_topo` imports Mininet lazily and replays the plan into a ``Topo``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from testbed.link import DirectedLink
from testbed.spec.topology import Topology, directed_links

if TYPE_CHECKING:  # pragma: no cover
    from mininet.topo import Topo


@dataclass(frozen=True)
class MininetLink:
    a: str
    b: str
    opts: dict[str, Any]  # Topo.addLink options (without the link class)


def _direction(link: DirectedLink) -> dict[str, Any]:
    """TCLink parameters shaping the egress of ``link.src`` (traffic src -> dst)."""
    params: dict[str, Any] = {"bw": round(link.bandwidth_gbps * 1000, 3), "delay": f"{link.latency_ms:.3f}ms"}
    if link.jitter_ms:
        params["jitter"] = f"{link.jitter_ms:.3f}ms"
    if link.loss_pct:
        params["loss"] = link.loss_pct
    return params


IFNAMSIZ = 15  # the kernel's limit on interface names


def _intf_names(k: int, prefix: str) -> tuple[str, str]:
    names = f"{prefix}w{k}a", f"{prefix}w{k}b"
    if len(names[0]) > IFNAMSIZ:
        raise ValueError(f"interface name {names[0]!r} longer than {IFNAMSIZ} characters")
    return names


def link_plan(topology: Topology, *, intf_prefix: str = "") -> list[MininetLink]:
    """The links with their per-direction TCLink parameters, in topology order."""
    directed = directed_links(topology.sites, topology.links)  # a -> b, b -> a for each link, in order
    plan = []
    for k, (ab, ba) in enumerate(zip(directed[0::2], directed[1::2])):
        name_a, name_b = _intf_names(k, intf_prefix)
        plan.append(MininetLink(ab.src, ab.dst, {
            "intfName1": name_a,
            "intfName2": name_b,
            "params1": _direction(ab),
            "params2": _direction(ba),
        }))
    return plan


def to_mininet_topo(topology: Topology, *, intf_prefix: str = "") -> "Topo":
    """A Mininet ``Topo`` (hosts = sites, links = ``TCLink`` with :func:`link_plan`'s options)."""
    from mininet.link import TCLink
    from mininet.topo import Topo

    topo = Topo()
    for site in topology.sites:
        topo.addHost(site.name)
    for link in link_plan(topology, intf_prefix=intf_prefix):
        topo.addLink(link.a, link.b, cls=TCLink, **link.opts)
    return topo
