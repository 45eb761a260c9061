"""Discrete-event analytic substrate.

A migration's *actual* duration comes from the truth, never from the controller's forecast. Its
phases run in the emulated substrates' order: the checkpoint is written at the source, then
transferred, then loaded at the destination, then the job resumes after the downtime
(``resume = start + checkpoint + transfer + load + downtime``).

- checkpoint, load: the scenario's ``substrate.io_model`` (:mod:`testbed.io_model`): by default a
  line in the checkpoint's size fitted to timed torch save / cold load on a real machine, with the
  measured spread, drawn per migration from a generator seeded by the run's seed, the job and the
  how-manieth migration of that job it is (the same draw for the same seed, whatever else moves);
  ``constant``: no checkpoint write and the constant ``t_load_s`` (the paper's arithmetic);
- transfer: the true bandwidth trace (times TCP protocol efficiency) integrated from the moment the
  checkpoint is written, after a handshake and slow-start ramp computed from the link RTT (behind
  long-lived TCP cross-traffic, plus the queueing delay of the link's ``queue``);
- downtime: the constant ``substrate.t_downtime_s`` (no calibration measures it).

The controller decided on forecasts and the feasibility model's constants. Nothing here is
measured: the migration record files every phase as ``outcome_*`` with ``outcome_basis`` modelled.
"""

from __future__ import annotations

import heapq
from collections import Counter
from pathlib import Path

import numpy as np

from testbed import io_model
from testbed.errors import SimulationError, TraceRangeError
from testbed.crosstraffic.model import entries_by_direction, expected_load, has_standing_queue, load_traces, queue_delay_ms
from testbed.feasibility import slow_start_penalty_s
from testbed.inputs import Inputs
from testbed.link import rtt_ms as round_trip_ms
from testbed.seeding import rng
from testbed.substrate.base import MigrationOrder, MigrationOutcome, Substrate


def io_truth(settings) -> io_model.IoModel | None:
    """The migration I/O model a scenario's ``substrate`` block chooses (None: ``constant``)."""
    choice = settings.io_model
    if choice == io_model.CONSTANT:
        return None
    if choice == io_model.MEASURED:
        return io_model.default_io_model(downtime_s=settings.t_downtime_s)
    return io_model.load_io_model(Path(choice), downtime_s=settings.t_downtime_s)


def cross_traffic_shares(inputs: Inputs, traces: dict) -> dict:
    """Per link direction with declared cross-traffic: the bandwidth trace's fair share for one more
    transfer (:func:`testbed.crosstraffic.model.share_trace`); ``traces``: the entries' trace files, read."""
    from testbed.crosstraffic.model import share_trace

    return {key: share_trace(inputs.bandwidth_gbps[key], group, seed=inputs.seed, direction=key,
                             queue=inputs.queue[key], traces=traces)
            for key, group in entries_by_direction(inputs.scenario.cross_traffic).items()
            if key in inputs.bandwidth_gbps}


PROBE_NOISE_FRAC = 0.1
"""The sim's model of a short bandwidth probe's error: lognormal, sigma 10 % (our assumption; the
emulated substrates measure theirs)."""


_UDP_SHARE = {
    "fifo": " (UDP takes its rate first: fifo)",
    "fair": " (each UDP stream gets at most one flow's share: fair queue)",
}
_RTT_INFLATION = {
    "fifo": " + RTT inflated by the standing queue (fifo: max(50 ms, 2 x RTT))",
    "fair": " + RTT inflated by one turn of each competing flow (fair queue)",
}


class SimSubstrate(Substrate):
    name = "sim"

    def __init__(self, inputs: Inputs):
        self._in = inputs
        self._model = inputs.scenario.substrate
        self._heap: list[tuple[float, int, MigrationOutcome]] = []
        self._seq = 0
        self._never: list[MigrationOrder] = []  # cannot finish before the bandwidth trace ends
        self._io = io_truth(self._model)
        self._migrations_of: Counter[str] = Counter()  # per job: migrations started so far
        sc = inputs.scenario
        self._load_traces = load_traces(sc.cross_traffic)
        self._share = cross_traffic_shares(inputs, self._load_traces)  # link direction -> a transfer's share under cross-traffic
        self._queued = {key: group for key, group in entries_by_direction(sc.cross_traffic).items()
                        if has_standing_queue(group)}  # directions with long-lived TCP cross-traffic

    def _io_s(self, order: MigrationOrder) -> tuple[float, float, float]:
        """(checkpoint, load, downtime) seconds of this migration. The draw's generator is seeded by
        the run's seed, the job and how many migrations of that job came before: reproducible, and
        independent of every other job's migrations (and of the order they start in)."""
        k = self._migrations_of[order.job_id]
        self._migrations_of[order.job_id] += 1
        if self._io is None:
            return 0.0, self._model.t_load_s, self._model.t_downtime_s
        return self._io.draw(order.checkpoint_gb, rng(self._in.seed, "sim-migration-io", order.job_id, k))

    def _queue_delay_ms(self, key: tuple[str, str], t_s: float, rtt_ms: float) -> float:
        """The queueing delay a transfer beginning at ``t_s`` meets behind the long-lived TCP
        cross-traffic of direction ``key``, by the link's queue (:func:`queue_delay_ms`): the flows
        the fair_share predictor would count then, on the link's true rate."""
        flows = expected_load(self._queued[key], t_s, self._load_traces).tcp_flows
        return queue_delay_ms(self._in.queue[key], rtt_ms, flows, self._in.bandwidth_gbps[key].at(t_s))

    def _transfer_s(self, order: MigrationOrder, t_begin_s: float) -> tuple[float, float] | None:
        """Return (transfer seconds, mean goodput Gbit/s) under the true bandwidth trace for a
        transfer that begins at ``t_begin_s``, or None if it would still be running when the trace
        ends (a day past the run)."""
        key = (order.src, order.dst)
        trace = self._share.get(key) or self._in.bandwidth_gbps.get(key)
        if trace is None:
            raise SimulationError(f"no link between {order.src} and {order.dst}")
        eff = self._model.protocol_efficiency
        ramp_s = 0.0
        try:
            if self._model.slow_start:
                rtt_ms = round_trip_ms(self._in.latency_ms[key])
                if key in self._queued:  # behind long-lived cross-traffic the queue stands: RTT inflates
                    rtt_ms += self._queue_delay_ms(key, t_begin_s, rtt_ms)
                ramp_s = slow_start_penalty_s(order.checkpoint_gb * 1e9, trace.at(t_begin_s), rtt_ms)
            line_gbit = 8.0 * order.checkpoint_gb / eff
            end = trace.time_to_accumulate(t_begin_s + ramp_s, line_gbit)
        except TraceRangeError:
            return None  # e.g. a 1e9 GB checkpoint: the migration never ends within the run
        transfer_s = end - t_begin_s
        return transfer_s, 8.0 * order.checkpoint_gb / transfer_s

    def probe_bandwidth(self, src: str, dst: str, t_s: float, duration_s: float):
        """``bandwidth_basis: probe`` on sim: the share a transfer would get now (the true bandwidth,
        under the cross-traffic model where the direction has some) x lognormal noise of sigma
        :data:`PROBE_NOISE_FRAC` (a short probe's error), drawn from the run's seed, the direction and
        the time; it lasts ``duration_s`` and sends what that share carries in it (goodput)."""
        from testbed.crosstraffic.predict import Probe
        from testbed.feasibility import TCP_EFFICIENCY_MTU1500

        trace = self._share.get((src, dst)) or self._in.bandwidth_gbps.get((src, dst))
        if trace is None:
            raise SimulationError(f"no link between {src} and {dst}")
        noise = float(np.exp(rng(self._in.seed, "sim-probe", src, dst, round(t_s, 6)).normal(0.0, PROBE_NOISE_FRAC)))
        gbps = trace.at(t_s) * noise
        sent = int(gbps * TCP_EFFICIENCY_MTU1500 * 1e9 / 8.0 * duration_s)
        return Probe(gbps=gbps, scenario_s=duration_s, bytes_sent=sent,
                     detail=f"modelled: true share x lognormal noise (sigma {PROBE_NOISE_FRAC:g})")

    def start_migration(self, order: MigrationOrder) -> None:
        checkpoint_s, load_s, downtime_s = self._io_s(order)
        timing = self._transfer_s(order, order.t_start_s + checkpoint_s)  # sent once it is written
        if timing is None:  # still in flight at the end of the run: the controller records it unfinished
            self._never.append(order)
            return
        transfer_s, goodput = timing
        outcome = MigrationOutcome(
            order=order,
            status="completed",
            checkpoint_s=checkpoint_s,
            transfer_s=transfer_s,
            load_s=load_s,
            downtime_s=downtime_s,
            goodput_gbps=goodput,
            phases_measured=(),
            detail="modelled: true bandwidth trace" + (" (fair share under cross-traffic)" if (order.src, order.dst) in self._share else "")
            + " x protocol efficiency" + (" + slow start" if self._model.slow_start else "")
            + ("; checkpoint, load: size-dependent I/O model" if self._io is not None else "; constant load"),
        )
        heapq.heappush(self._heap, (outcome.resume_s, self._seq, outcome))
        self._seq += 1

    def poll(self, until_s: float) -> list[MigrationOutcome]:
        done = []
        while self._heap and self._heap[0][0] <= until_s:
            done.append(heapq.heappop(self._heap)[2])
        return done

    def in_flight(self) -> list[MigrationOrder]:
        return [o.order for _, _, o in sorted(self._heap)] + list(self._never)

    def pending_outcomes(self) -> list[MigrationOutcome]:
        """Sim only: outcomes already known for migrations still in flight at the end of a run."""
        return [o for _, _, o in sorted(self._heap)]

    def describe(self) -> dict:
        m = self._model
        if self._io is None:
            io = {"checkpoint_s": "none (io_model: constant): the checkpoint write is not modelled, 0 s",
                  "load_s": f"constant {m.t_load_s} s (io_model: constant)",
                  "downtime_s": f"constant {m.t_downtime_s} s"}
        else:
            io = {k: f"{v}; drawn per migration (seed, job, its migration number)" if k != "downtime_s" else v
                  for k, v in self._io.describe().items()}
        return {
            "substrate": "sim",
            "clock": "virtual (discrete steps of step_s; migration ends at exact event times)",
            "time_scale": None,
            "byte_scale": 1.0,
            "measured": [],
            "records": "every phase is modelled: migrations.parquet files them as outcome_* with outcome_basis "
                       "modelled (no actual_* value)",
            "io_model": m.io_model,
            "cross_traffic": [{"src": e.src, "dst": e.dst, "model": "fair share of the bandwidth trace"
                               + (_UDP_SHARE[self._in.queue[e.key]] if e.udp or e.trace else "")
                               + (_RTT_INFLATION[self._in.queue[e.key]] if has_standing_queue([e]) else "")}
                              for e in self._in.scenario.cross_traffic],
            "modelled": {
                "checkpoint_s": io["checkpoint_s"],
                "transfer_s": "integral of the true bandwidth trace"
                + (" (on links with cross-traffic: its fair share, testbed.crosstraffic.model)" if self._share else "")
                + f" x protocol efficiency {m.protocol_efficiency:.4f}"
                + (" + handshake/slow-start from link RTT" if m.slow_start else "")
                + ", from the end of the checkpoint write",
                "load_s": io["load_s"],
                "downtime_s": io["downtime_s"],
                "job_progress": "node speed x time (GPU-hours)",
                "energy": "node power profile x time; renewable share from the true renewable trace",
            },
        }
