"""Where a live fabric cannot reproduce a scenario's cross-traffic faithfully (pure): said before the
run starts and kept in the manifest (``substrate.cross_traffic_cautions``).

Two limits, both measured on the netns fabric (docs/how-to/cross-traffic.md, "Measured here"):

- **Slow links on the wire.** The shaper sits on the sending site's own interface, so below about
  :data:`MIN_WIRE_MBIT` TCP Small Queues, not congestion control, splits its queue: a transfer got
  1/14 of its fair share at 100 Mbit/s on the wire.
- **Short transfers.** A TCP flow that joins flows already holding the queue needs seconds of *wall*
  time to reach its share (cubic grows its window as a function of elapsed time, not of round trips),
  and ``time_scale`` stretches those seconds into ``time_scale`` times as many scenario seconds. A
  transfer that lasts less than :data:`MIN_JOIN_WALL_S` on the wire at its fair share runs slower than
  the fair-share model says: a 4 GB move beside 3 cubic flows, 1.3 s on the wire at time_scale 100,
  took 1.2-1.5 x the model's time; a 40 GB one (13 s) 1.03-1.16 x.
"""

from __future__ import annotations

from testbed.crosstraffic.model import entries_by_direction, expected_load, fair_share_gbps, has_standing_queue

MIN_WIRE_MBIT = 400.0
"""Below this wall-clock rate a link with competing TCP flows splits its queue by TCP Small Queues."""

MIN_JOIN_WALL_S = 5.0
"""A transfer shorter than this on the wire, beside flows that hold the queue, is still joining."""


def cautions(scenario, scaling, checkpoint_gb: list[float]) -> list[str]:
    """One line per link direction with long-lived TCP cross-traffic that this run's scaling
    (:class:`testbed.netem.scaling.Scaling`) cannot reproduce faithfully, given the checkpoint sizes
    the run may move (``checkpoint_gb``; the smallest is the one that joins for the shortest time)."""
    links = {frozenset((link.a, link.b)): link for link in scenario.links}
    smallest_gb = min(checkpoint_gb, default=None)
    out = []
    for (src, dst), entries in sorted(entries_by_direction(scenario.cross_traffic).items()):
        link = links.get(frozenset((src, dst)))
        if link is None or not has_standing_queue(entries):
            continue
        rate_gbps = link.directed_bandwidth_gbps(src, dst)
        wire_mbit = scaling.rate_mbit(rate_gbps)
        where = f"cross_traffic {src} -> {dst}"
        if wire_mbit < MIN_WIRE_MBIT:
            out.append(f"{where}: the link carries {wire_mbit:.0f} Mbit/s on the wire (byte_scale x time_scale x "
                       f"{rate_gbps:g} Gbit/s), below {MIN_WIRE_MBIT:.0f}: TCP Small Queues, not congestion control, "
                       "splits the shaper's queue there, and a transfer can get far less than its fair share; "
                       "raise emulation.byte_scale")
        if smallest_gb is None:
            continue
        share_gbps = fair_share_gbps(rate_gbps, expected_load(entries, 0.0))
        wall_s = scaling.wall_s(smallest_gb * 8.0 / share_gbps)
        if wall_s < MIN_JOIN_WALL_S:
            out.append(f"{where}: a {smallest_gb:g} GB move lasts {wall_s:.2g} s on the wire at its fair share, "
                       f"less than the {MIN_JOIN_WALL_S:g} s a joining TCP flow takes to reach it beside flows "
                       f"that hold the queue (time_scale {scaling.time_scale:g} stretches that wall time): "
                       "expect transfers slower than the fair-share model; lower emulation.time_scale (or move more bytes) "
                       "for transfers that reach it")
    return out
