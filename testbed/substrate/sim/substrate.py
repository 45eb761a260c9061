"""Discrete-event analytic substrate.

A migration's *actual* duration comes from the truth, never from the controller's forecast:
the transfer integrates the true bandwidth trace (times TCP protocol efficiency) from the
moment it starts, after a handshake and slow-start ramp computed from the link RTT; load and
downtime come from the scenario's ``substrate`` block. The controller decided on forecasts.
Nothing here is measured: the migration record files every phase as ``model_*``.
"""

from __future__ import annotations

import heapq

from testbed.errors import SimulationError, TraceRangeError
from testbed.feasibility import slow_start_penalty_s
from testbed.inputs import Inputs
from testbed.link import rtt_ms as round_trip_ms
from testbed.substrate.base import MigrationOrder, MigrationOutcome, Substrate


class SimSubstrate(Substrate):
    name = "sim"

    def __init__(self, inputs: Inputs):
        self._in = inputs
        self._model = inputs.scenario.substrate
        self._heap: list[tuple[float, int, MigrationOutcome]] = []
        self._seq = 0
        self._never: list[MigrationOrder] = []  # cannot finish before the bandwidth trace ends

    def _transfer_s(self, order: MigrationOrder) -> tuple[float, float] | None:
        """Return (transfer seconds, mean goodput Gbit/s) under the true bandwidth trace, or None if
        the transfer would still be running when the trace ends (a day past the run)."""
        key = (order.src, order.dst)
        trace = self._in.bandwidth_gbps.get(key)
        if trace is None:
            raise SimulationError(f"no link between {order.src} and {order.dst}")
        eff = self._model.protocol_efficiency
        ramp_s = 0.0
        if self._model.slow_start:
            rtt_ms = round_trip_ms(self._in.latency_ms[key])
            ramp_s = slow_start_penalty_s(order.checkpoint_gb * 1e9, trace.at(order.t_start_s), rtt_ms)
        line_gbit = 8.0 * order.checkpoint_gb / eff
        try:
            end = trace.time_to_accumulate(order.t_start_s + ramp_s, line_gbit)
        except TraceRangeError:
            return None  # e.g. a 1e9 GB checkpoint: the migration never ends within the run
        transfer_s = end - order.t_start_s
        return transfer_s, 8.0 * order.checkpoint_gb / transfer_s

    def start_migration(self, order: MigrationOrder) -> None:
        timing = self._transfer_s(order)
        if timing is None:  # still in flight at the end of the run: the controller records it unfinished
            self._never.append(order)
            return
        transfer_s, goodput = timing
        outcome = MigrationOutcome(
            order=order,
            status="completed",
            transfer_s=transfer_s,
            load_s=self._model.t_load_s,
            downtime_s=self._model.t_downtime_s,
            goodput_gbps=goodput,
            phases_measured=(),
            detail="modelled: true bandwidth trace x protocol efficiency" + (" + slow start" if self._model.slow_start else ""),
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
        return {
            "substrate": "sim",
            "clock": "virtual (discrete steps of step_s; migration ends at exact event times)",
            "time_scale": None,
            "byte_scale": 1.0,
            "measured": [],
            "records": "every phase is modelled: migrations.parquet files them as model_* (no actual_* value)",
            "modelled": {
                "transfer_s": f"integral of the true bandwidth trace x protocol efficiency {m.protocol_efficiency:.4f}"
                + (" + handshake/slow-start from link RTT" if m.slow_start else ""),
                "load_s": f"constant {m.t_load_s} s",
                "downtime_s": f"constant {m.t_downtime_s} s",
                "job_progress": "node speed x time (GPU-hours)",
                "energy": "node power profile x time; renewable share from the true renewable trace",
            },
        }
