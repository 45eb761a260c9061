"""Where a live fabric cannot reproduce a scenario's cross-traffic faithfully (pure): said before the
run starts and kept in the manifest (``substrate.cross_traffic_cautions``).

Two limits, both measured on the netns fabric (docs/how-to/cross-traffic.md, "Measured here"):

- **A FIFO on a slow link on the wire** (``queue: fifo``). The shaper sits on the sending site's own
  interface, so in one FIFO TCP Small Queues, not congestion control, splits the link among the flows:
  below :data:`MIN_WIRE_MBIT` a 4th flow beside 3 got 0.09 of a 50 Mbit/s link (its fair share 0.25).
  The per-flow fair queue (``queue: fair``, the default) gave it 0.239 from 20 to 1000 Mbit/s.
- **Short transfers.** A transfer beside flows that hold the link reaches the fair-share model's time
  only once it lasts more than about :data:`MIN_JOIN_WALL_S` on the wire: with the fair queue, at
  time_scale 100 beside 3 cubic flows, a 0.4 GB move (0.13 s on the wire) took 1.4-1.7 x the model's
  time, 1 GB (0.32 s) 1.3 x, 4 GB (1.3 s) 1.05-1.09 x, 40 GB (12.8 s) 1.01-1.02 x: a joining flow's
  ramp and the transfer's fixed costs are wall time, which ``time_scale`` stretches.
"""

from __future__ import annotations

from testbed.crosstraffic.model import entries_by_direction, expected_load, fair_share_gbps, has_standing_queue

MIN_WIRE_MBIT = 400.0
"""Below this wall-clock rate a FIFO link with competing TCP flows is split by TCP Small Queues."""

MIN_JOIN_WALL_S = 1.0
"""A transfer shorter than this on the wire, beside flows that hold the link, runs slower than the model."""


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
        if link.queue == "fifo" and wire_mbit < MIN_WIRE_MBIT:
            out.append(f"{where}: the link's queue is fifo and it carries {wire_mbit:.0f} Mbit/s on the wire "
                       f"(byte_scale x time_scale x {rate_gbps:g} Gbit/s), below {MIN_WIRE_MBIT:.0f}: TCP Small Queues, "
                       "not congestion control, splits one FIFO there, and a transfer can get far less than its fair "
                       "share; raise emulation.byte_scale, or give the link queue: fair")
        if smallest_gb is None:
            continue
        share_gbps = fair_share_gbps(rate_gbps, expected_load(entries, 0.0), queue=link.queue)
        wall_s = scaling.wall_s(smallest_gb * 8.0 / share_gbps)
        if wall_s < MIN_JOIN_WALL_S:
            out.append(f"{where}: a {smallest_gb:g} GB move lasts {wall_s:.2g} s on the wire at its fair share, "
                       f"less than the {MIN_JOIN_WALL_S:g} s a transfer beside flows that hold the link needs to reach "
                       f"it (a joining flow's ramp and fixed costs are wall time, which time_scale "
                       f"{scaling.time_scale:g} stretches): expect transfers slower than the fair-share model; lower "
                       "emulation.time_scale (or move more bytes) for transfers that reach it")
    return out
