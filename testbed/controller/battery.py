"""A site battery, stepped once per trace step: charged from curtailed renewable energy, discharged before the grid.

Per step of ``dt`` seconds, with ``surplus = renewable available - renewable used`` (what the site
would curtail) and ``deficit = demand - renewable used`` (what it would draw from the grid):

* charge   ``c = min(surplus, charge_kw x dt, (capacity - soc) / eta)``; ``soc += eta x c``
* discharge ``d = min(deficit, discharge_kw x dt, soc)``;                  ``soc -= d``

``eta`` is the round-trip efficiency, booked entirely when charging (``loss = (1 - eta) x c``), so
every kWh in the battery can be delivered. A site never charges and discharges in one step
(renewables cover the demand or they do not). What closes exactly, every step::

    renewable available = renewable used + c + curtailed
    demand              = renewable used + d + grid
    soc_end             = soc_start + c - loss - d,   0 <= soc <= capacity
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Battery", "BatteryStep"]


@dataclass(frozen=True)
class BatteryStep:
    """What the battery did over one step (kWh; ``soc_kwh`` at the step's end)."""

    charge_kwh: float = 0.0
    discharge_kwh: float = 0.0
    loss_kwh: float = 0.0
    soc_kwh: float = 0.0


class Battery:
    def __init__(self, *, capacity_kwh: float, charge_kw: float, discharge_kw: float,
                 round_trip_efficiency: float = 0.9, initial_soc_frac: float = 0.0):
        for key, value in (("capacity_kwh", capacity_kwh), ("charge_kw", charge_kw), ("discharge_kw", discharge_kw)):
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"battery: {key} must be a finite number > 0, got {value}")
        if not 0.0 < round_trip_efficiency <= 1.0:
            raise ValueError(f"battery: round_trip_efficiency must be in (0, 1], got {round_trip_efficiency}")
        if not 0.0 <= initial_soc_frac <= 1.0:
            raise ValueError(f"battery: initial_soc_frac must be in [0, 1], got {initial_soc_frac}")
        self.capacity_kwh = float(capacity_kwh)
        self.charge_kw = float(charge_kw)
        self.discharge_kw = float(discharge_kw)
        self.efficiency = float(round_trip_efficiency)
        self.soc_kwh = self.capacity_kwh * initial_soc_frac

    @classmethod
    def of(cls, spec) -> "Battery":
        """From a scenario's ``testbed.spec.grid_signals.Battery`` entry."""
        return cls(capacity_kwh=spec.capacity_kwh, charge_kw=spec.charge_kw, discharge_kw=spec.discharge_kw,
                   round_trip_efficiency=spec.round_trip_efficiency, initial_soc_frac=spec.initial_soc_frac)

    def available_kw(self, dt_s: float) -> float:
        """The mean power it can deliver over the next ``dt_s`` (rate- and charge-limited)."""
        return min(self.discharge_kw, self.soc_kwh * 3600.0 / dt_s) if dt_s > 0 else 0.0

    def step(self, dt_s: float, *, surplus_kwh: float, deficit_kwh: float) -> BatteryStep:
        """Charge from ``surplus_kwh`` or discharge into ``deficit_kwh`` over ``dt_s`` (model in the module docstring)."""
        if not (dt_s > 0 and surplus_kwh >= 0 and deficit_kwh >= 0):
            raise ValueError(f"battery step: needs dt_s > 0 and non-negative surplus/deficit "
                             f"(got {dt_s}, {surplus_kwh}, {deficit_kwh})")
        if surplus_kwh > 0 and deficit_kwh > 0:
            raise ValueError("battery step: a site has a renewable surplus or a deficit in one step, not both")
        hours = dt_s / 3600.0
        room_kwh = max(0.0, self.capacity_kwh - self.soc_kwh)
        charge = min(surplus_kwh, self.charge_kw * hours, room_kwh / self.efficiency)
        stored = charge * self.efficiency
        self.soc_kwh = min(self.capacity_kwh, self.soc_kwh + stored)
        discharge = min(deficit_kwh, self.discharge_kw * hours, self.soc_kwh)
        self.soc_kwh = max(0.0, self.soc_kwh - discharge)
        return BatteryStep(charge, discharge, charge - stored, self.soc_kwh)
