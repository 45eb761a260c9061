"""The one link builder: a fabric's links from directed links.

Every live fabric — an emulated run and the federated exchange (:func:`scenario_links`),
``testbed net up`` and ``testbed bench`` (:func:`file_links`, and bench's two-site pairs) — gets its
links from :func:`fabric_links`, given :class:`~testbed.link.DirectedLink` values (from
:func:`testbed.spec.topology.directed_links`) and, for an emulated run, the
:class:`~testbed.netem.scaling.Scaling` computed from the same directed links.

One name per quantity, on each side of the scaling (the only place one becomes the other):

=============  ==================================  ===================================
quantity       scenario time (YAML, DirectedLink)   wall clock (LinkInput/LinkPlan, tc)
=============  ==================================  ===================================
bandwidth      ``bandwidth_gbps``                   ``rate_ab_mbit`` / ``rate_ba_mbit``
                                                    (``Scaling.rate_mbit``; tbf ``rate``)
latency        ``latency_ms`` (one way)             ``delay_ms`` (``Scaling.delay_ms``;
                                                    netem ``delay`` / the relay's delay)
jitter, loss   ``jitter_ms``, ``loss_pct``          ``jitter_ms``, ``loss_pct``
round trip     ``rtt_ms`` = :func:`testbed.link.rtt_ms` (2 x one-way), on either side
=============  ==================================  ===================================
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

from testbed.link import DirectedLink
from testbed.netem.plan import LinkInput
from testbed.netem.scaling import Scaling, choose_scaling

if TYPE_CHECKING:  # pragma: no cover
    from testbed.inputs import Inputs


def fabric_links(links: Sequence[DirectedLink], scaling: Scaling | None = None, *,
                 start_gbps: Mapping[tuple[str, str], float] | None = None,
                 impaired: bool = True) -> list[LinkInput]:
    """One :class:`LinkInput` per site pair, in the order of its first direction in ``links``
    (both directions must be given). Rates: ``start_gbps[(src, dst)]`` where given (a run's
    bandwidth traces at t = 0), else the link's ``bandwidth_gbps``; through ``scaling`` (wall
    clock) when given, else as they are. ``impaired=False``: rates only (no latency, jitter, loss)."""
    by_key = {link.key: link for link in links}
    out: list[LinkInput] = []
    seen: set[frozenset[str]] = set()
    for ab in links:
        pair = frozenset(ab.key)
        if pair in seen:
            continue
        seen.add(pair)
        try:
            ba = by_key[(ab.dst, ab.src)]
        except KeyError:
            raise ValueError(f"link {ab.src}-{ab.dst}: no direction {ab.dst} -> {ab.src} given") from None
        rate_ab, rate_ba = (_rate_mbit(d, scaling, start_gbps) for d in (ab, ba))
        if not impaired:
            out.append(LinkInput(ab.src, ab.dst, rate_ab, rate_ba, queue=ab.queue))
            continue
        out.append(LinkInput(ab.src, ab.dst, rate_ab, rate_ba, delay_ms=_wall_ms(ab.latency_ms, scaling),
                             jitter_ms=_wall_ms(ab.jitter_ms, scaling), loss_pct=ab.loss_pct, queue=ab.queue))
    return out


def scenario_links(inputs: "Inputs", scaling: Scaling, links: Sequence[DirectedLink] | None = None,
                   impaired: bool = True) -> list[LinkInput]:
    """An emulated run's fabric links (the migration study's substrates and the federated exchange):
    every scenario link at its scaled rate (each direction, from the bandwidth trace at t = 0), scaled
    latency and jitter, and loss. ``links``: the directed links the scaling was computed from
    (default: the scenario's)."""
    from testbed.spec.topology import directed_links

    import dataclasses

    sc = inputs.scenario
    links = directed_links(sc.sites, sc.links) if links is None else links
    start = {key: trace.at(0.0) for key, trace in inputs.bandwidth_gbps.items()}
    peak = {key: float(max(trace.values, default=trace.at(0.0))) for key, trace in inputs.bandwidth_gbps.items()}
    out = []
    for li in fabric_links(links, scaling, start_gbps=start, impaired=impaired):
        highest = max((peak[k] for k in ((li.a, li.b), (li.b, li.a)) if k in peak), default=0.0)
        out.append(dataclasses.replace(li, peak_mbit=scaling.rate_mbit(highest)) if highest else li)
    return out


def scaled_links(inputs: "Inputs", *, capacity_mbit: float, impaired: bool = True,
                 capacity_source: str = "") -> tuple[Scaling, list[LinkInput]]:
    """An emulated run's scaling and fabric links, both from the same directed links: the fastest
    link the scaling fits into ``capacity_mbit`` is the fastest link the fabric is built with."""
    from testbed.spec.topology import directed_links

    sc = inputs.scenario
    directed = directed_links(sc.sites, sc.links)
    scaling = choose_scaling(sc, capacity_mbit=capacity_mbit, links=directed, capacity_source=capacity_source)
    return scaling, scenario_links(inputs, scaling, directed, impaired=impaired)


def _rate_mbit(link: DirectedLink, scaling: Scaling | None, start_gbps: Mapping[tuple[str, str], float] | None) -> float:
    gbps = start_gbps[link.key] if start_gbps is not None else link.bandwidth_gbps
    return scaling.rate_mbit(gbps) if scaling is not None else gbps * 1000


def _wall_ms(ms: float, scaling: Scaling | None) -> float:
    return scaling.delay_ms(ms) if scaling is not None else ms


def file_links(path: Path) -> tuple[list[str], list[LinkInput]]:
    """Site names and fabric links at real (unscaled) values of a scenario or topology file: what
    ``testbed net up`` and ``testbed bench`` build."""
    from testbed.spec.topology import directed_links, read_sites_and_links

    sites, links = read_sites_and_links(path)
    return [s.name for s in sites], fabric_links(directed_links(sites, links))
