"""The analytic model of cross-traffic (pure): what share of a link one more TCP transfer gets.

For one link direction of rate ``B`` (Gbit/s) carrying declared cross-traffic
(:class:`testbed.spec.cross_traffic.CrossTraffic`, summed over the entries of that direction):

- Poisson TCP flows of offered load ``L = arrivals_per_s x mean size x 8`` (Gbit/s) are served
  processor-sharing with the ``n`` long-lived flows and the transfer: their mean number in the
  system solves ``N = rho (n + 1 + N)`` with ``rho = L / B``, so the others get ``R = B - L``;
- ``n`` long-lived TCP flows (``tcp.flows``, the ``on_off`` flows that are on, the ``trace``'s
  ``flows`` at that time) and the transfer split what is left equally (TCP fairness, same RTT and
  congestion control);
- UDP is not congestion controlled, and what it leaves depends on the link's ``queue``:

  - ``fifo``: it takes its rate first: ``share = max(B x MIN_SHARE_FRAC, R - udp) / (n + 1)``;
  - ``fair`` (per-flow fair queue): each of the ``k`` UDP streams (one per entry; their rates taken
    equal) is one flow of the queue and gets at most what every flow gets (max-min fairness):
    ``share = (R - udp) / (n + 1)`` while ``udp / k <= R / (n + 1 + k)``, else ``R / (n + 1 + k)``.

  ``R`` is floored at ``B x MIN_SHARE_FRAC``.

Two uses: the **sim substrate's truth** (:func:`share_trace`: the transfer integrates this share
over time, with each on/off flow's seeded schedule and the trace file's steps), and the
**fair_share predictor** (:func:`expected_load`: on/off flows counted at their duty cycle, since
the predictor does not know their phase). RTT inflation: behind long-lived TCP flows the
transfer's slow-start ramp runs at RTT + :func:`queue_delay_ms`, which depends on the link's queue
(the sim's only use of it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Sequence

from testbed.spec.cross_traffic import LoadTrace, LoadTraceError, on_off_phases, read_load_trace  # noqa: F401
from testbed.spec.topology import QUEUES

if TYPE_CHECKING:  # numpy is imported where it is used: reading a scenario must not load it
    import numpy as np

MIN_SHARE_FRAC = 0.01
"""The least share of the link a transfer is modelled to get (UDP and Poisson load over the rate
would otherwise leave none: a real TCP flow still gets a trickle)."""

MAX_SCHEDULE_POINTS = 200_000
"""Above this many on/off switching points over the run, the sim uses the duty cycle instead."""


@dataclass(frozen=True)
class Load:
    """Cross-traffic on one link direction at one instant: long-lived TCP flows (may be a mean,
    hence float), UDP rate and Poisson TCP load (Gbit/s)."""

    tcp_flows: float = 0.0
    udp_gbps: float = 0.0
    poisson_gbps: float = 0.0
    udp_streams: int = 0  # how many UDP streams carry ``udp_gbps`` (one per entry that sends UDP)

    def __add__(self, other: "Load") -> "Load":
        return Load(self.tcp_flows + other.tcp_flows, self.udp_gbps + other.udp_gbps,
                    self.poisson_gbps + other.poisson_gbps, self.udp_streams + other.udp_streams)

    @property
    def empty(self) -> bool:
        return self.tcp_flows == 0 and self.udp_gbps == 0 and self.poisson_gbps == 0


def fair_share_gbps(rate_gbps: float, load: Load, *, queue: str) -> float:
    """The share of a link direction of ``rate_gbps`` whose queue is ``queue`` (a link's ``queue``:
    fair or fifo) one more TCP flow gets under ``load`` (module doc)."""
    if not (math.isfinite(rate_gbps) and rate_gbps > 0):
        raise ValueError(f"rate_gbps must be > 0, got {rate_gbps}")
    if queue not in QUEUES:
        raise ValueError(f"queue must be 'fair' or 'fifo', got {queue!r}")
    floor = rate_gbps * MIN_SHARE_FRAC
    rest = max(floor, rate_gbps - load.poisson_gbps)  # what the Poisson flows leave
    elastic = load.tcp_flows + 1.0  # the long-lived flows and the transfer
    if queue == "fifo" or load.udp_gbps <= 0:
        return max(floor, rest - load.udp_gbps) / elastic
    streams = max(1, load.udp_streams)
    level = rest / (elastic + streams)  # every flow's share when each UDP stream is capped at it
    if load.udp_gbps / streams <= level:
        return (rest - load.udp_gbps) / elastic
    return level


FAIR_QUEUE_TURN_BYTES = 1514
"""What one competing flow sends per turn of a per-flow fair queue, as the sim models it: one
full-size Ethernet frame (fq_codel's and sfq's quantum). The netns fabric's fair queue takes turns of
one 64 KB GSO packet (:mod:`testbed.netem.fairq`): a host's view of the same frames."""


def queue_delay_ms(queue: str, rtt_ms: float, flows: float, rate_gbps: float) -> float:
    """The queueing delay a transfer's packets meet on a link direction of ``rate_gbps`` (its share
    of the queue's rate) whose queue (a link's ``queue``) holds ``flows`` long-lived TCP flows:

    - ``fifo``: loss-based TCP keeps the one queue full, and the emulated shaper's queue holds
      max(50 ms, 2 x RTT) of traffic (:func:`testbed.netem.qdisc.tbf_params`): the sim takes the same,
      so RTT inflation is alike;
    - ``fair``: the transfer's packets wait in their own queue, behind its own packets only; each
      turn, every other flow with packets waiting sends :data:`FAIR_QUEUE_TURN_BYTES` first:
      ``flows x turn / rate``.
    """
    if queue not in QUEUES:
        raise ValueError(f"queue must be 'fair' or 'fifo', got {queue!r}")
    if queue == "fifo":
        return max(50.0, 2.0 * rtt_ms)
    if not (math.isfinite(rate_gbps) and rate_gbps > 0):
        raise ValueError(f"rate_gbps must be > 0, got {rate_gbps}")
    return flows * FAIR_QUEUE_TURN_BYTES * 8.0 / (rate_gbps * 1e9) * 1e3


def has_standing_queue(entries: Iterable) -> bool:
    """Cross-traffic that keeps a queue standing: long-lived TCP flows (tcp, on/off, a trace's flows)."""
    return any(e.tcp or e.on_off or e.trace for e in entries)


# ------------------------------------------------------------------------------- trace files


# ------------------------------------------------------------------------------- schedules


def on_off_count(t_s: float, phases: "np.ndarray", on_s: float, off_s: float) -> int:
    """How many of the on/off flows are on at ``t_s`` (a flow is on for the first ``on_s`` of its period)."""
    import numpy as np

    period = on_s + off_s
    return int(np.count_nonzero(np.mod(t_s + phases, period) < on_s))


def poisson_gbps(entry) -> float:
    p = entry.poisson
    return 0.0 if p is None else p.arrivals_per_s * p.mean_size_mb * 8e-3


def expected_load(entries: Iterable, t_s: float, traces: dict | None = None) -> Load:
    """The declared cross-traffic of ``entries`` at ``t_s`` as the fair_share predictor sees it:
    on/off flows at their duty cycle (the predictor does not know their phase)."""
    total = Load()
    for e in entries:
        n = float(e.tcp.flows if e.tcp else 0)
        if e.on_off:
            n += e.on_off.flows * e.on_off.on_s / (e.on_off.on_s + e.on_off.off_s)
        total = total + _entry_load(e, n, t_s, traces)
    return total


def _entry_load(e, n: float, t_s: float, traces: dict | None) -> Load:
    """Entry ``e``'s load at ``t_s`` given its long-lived TCP flows ``n`` (on/off counted by the
    caller): its UDP stream (``udp``, or a trace's rate at ``t_s``), its trace's flows, its Poisson load."""
    udp = e.udp.rate_gbps if e.udp else 0.0
    if e.trace and traces is not None:
        k, u = traces[e.trace].at(t_s)
        n, udp = n + k, udp + u
    return Load(n, udp, poisson_gbps(e), 1 if udp > 0 else 0)


def _breakpoints(entries: Sequence, traces: dict, phases: dict, t0: float, t1: float) -> "np.ndarray | None":
    import numpy as np

    pts: list[np.ndarray] = []
    for i, e in enumerate(entries):
        if e.trace:
            tt = np.asarray(traces[e.trace].times_s)
            pts.append(tt[(tt > t0) & (tt < t1)])
        if e.on_off:
            period = e.on_off.on_s + e.on_off.off_s
            n = (t1 - t0) / period * 2 * e.on_off.flows
            if n > MAX_SCHEDULE_POINTS:
                return None
            for ph in phases[i]:
                k0 = math.floor((t0 + ph) / period) - 1
                k1 = math.ceil((t1 + ph) / period) + 1
                starts = np.arange(k0, k1 + 1) * period - ph
                for edge in (starts, starts + e.on_off.on_s):
                    pts.append(edge[(edge > t0) & (edge < t1)])
    return np.unique(np.concatenate(pts)) if pts else np.empty(0)


def share_trace(bandwidth, entries: Sequence, *, seed: int, direction: tuple[str, str], queue: str,
                traces: dict | None = None):
    """The sim's truth: the share of the link direction's bandwidth trace (a
    :class:`~testbed.traces.base.Trace` in Gbit/s) one more transfer gets under ``entries`` over
    the trace's whole range, on a link whose queue is ``queue``, as a Trace (step-hold). On/off flows
    follow their seeded schedule (their duty cycle where the schedule would exceed
    :data:`MAX_SCHEDULE_POINTS`)."""
    import numpy as np

    from testbed.traces.base import Trace

    traces = traces or {}
    t0, t1 = bandwidth.start_s, bandwidth.end_s
    phases = {i: on_off_phases(e.on_off.flows, e.on_off.on_s + e.on_off.off_s, seed, direction + (i,))
              for i, e in enumerate(entries) if e.on_off}
    extra = _breakpoints(entries, traces, phases, t0, t1)
    exact = extra is not None
    times = np.unique(np.concatenate([bandwidth.times_s, extra if exact else np.empty(0)]))
    values = np.empty(len(times))
    for j, t in enumerate(times):
        load = Load()
        for i, e in enumerate(entries):
            n = float(e.tcp.flows if e.tcp else 0)
            if e.on_off:
                o = e.on_off
                n += on_off_count(t, phases[i], o.on_s, o.off_s) if exact else o.flows * o.on_s / (o.on_s + o.off_s)
            load = load + _entry_load(e, n, t, traces)
        values[j] = fair_share_gbps(max(bandwidth.at(t), 1e-12), load, queue=queue)
    return Trace(times, values, unit=bandwidth.unit, name=f"{bandwidth.name}:fair-share", end_s=t1,
                 meta={**bandwidth.meta, "cross_traffic": "fair share (testbed.crosstraffic.model)"})


def entries_by_direction(entries: Iterable) -> dict[tuple[str, str], list]:
    out: dict[tuple[str, str], list] = {}
    for e in entries:
        out.setdefault(e.key, []).append(e)
    return out


def load_traces(entries: Iterable) -> dict[str, LoadTrace]:
    """Every trace file the entries name, read once (paths are resolved by the scenario loader)."""
    return {e.trace: read_load_trace(e.trace) for e in entries if e.trace}
