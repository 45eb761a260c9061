"""Bandwidth traces in Gbit/s: seeded variance around a nominal rate, plus degradation events.

``bandwidth_trace`` = ``nominal_bandwidth_gbps * m(t) * prod(1 - frac_e for events e active at t)``,
floored at ``floor_frac * nominal_bandwidth_gbps``, where

* ``m(t)`` is lognormal multiplicative variance: ``m = exp(sigma z - sigma^2 / 2)`` with ``z``
  a stationary AR(1) (see :mod:`testbed.traces.ar1`, correlation time ``corr_s``) and
  ``sigma^2 = ln(1 + cv^2)``, so ``E[m] = 1`` and the coefficient of variation of ``m`` is
  exactly ``cv``. ``cv = 0`` gives exactly the nominal rate. Seeded by
  ``Generator(PCG64(seed))``; one draw per step.
* each :class:`DegradationEvent` multiplies by ``1 - degradation_frac`` over
  ``[start_s, start_s + duration_s)``; overlapping events compose multiplicatively. Event edges
  need not lie on the step grid: they are inserted as breakpoints, so integrals and
  :meth:`~testbed.traces.base.Trace.time_to_accumulate` are exact across them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from testbed.traces.ar1 import ar1_standard
from testbed.traces.base import Trace

__all__ = ["DegradationEvent", "bandwidth_trace", "degrade", "steady_degradation"]


@dataclass(frozen=True)
class DegradationEvent:
    """Bandwidth reduced by ``degradation_frac`` (0.3 = 30% less) over ``[start_s, start_s + duration_s)``."""

    start_s: float
    duration_s: float
    degradation_frac: float

    def __post_init__(self) -> None:
        if not math.isfinite(self.start_s):
            raise ValueError(f"DegradationEvent.start_s must be finite, got {self.start_s}")
        if not (math.isfinite(self.duration_s) and self.duration_s > 0):
            raise ValueError(f"DegradationEvent.duration_s must be > 0, got {self.duration_s}")
        if not 0.0 <= self.degradation_frac <= 1.0:
            raise ValueError(
                f"DegradationEvent.degradation_frac must be in [0, 1], got {self.degradation_frac}")

    @property
    def end_s(self) -> float:
        return self.start_s + self.duration_s


def degrade(trace: Trace, events: Iterable[DegradationEvent], *, floor: float = 0.0,
            name: str | None = None) -> Trace:
    """``trace`` multiplied by ``1 - frac`` during each event (exact edges), then floored at ``floor``."""
    events = tuple(events)
    edges = [t for e in events for t in (e.start_s, e.end_s) if trace.start_s < t < trace.end_s]
    times = np.unique(np.concatenate((trace.times_s, np.asarray(edges, dtype=np.float64))))
    factor = np.ones(times.size)
    for e in events:
        a = int(np.searchsorted(times, e.start_s, side="left"))
        b = int(np.searchsorted(times, e.end_s, side="left"))
        factor[a:b] *= 1.0 - e.degradation_frac
    values = np.maximum(trace.at_many(times) * factor, floor)
    return Trace(times, values, unit=trace.unit, name=name or trace.name, end_s=trace.end_s,
                 meta={**trace.meta, "events": len(events), "floor": floor})


def bandwidth_trace(*, nominal_bandwidth_gbps: float, duration_s: float, step_s: float, seed: int,
                    cv: float = 0.0, corr_s: float = 600.0, events: Iterable[DegradationEvent] = (),
                    floor_frac: float = 0.01, name: str) -> Trace:
    """Bandwidth in Gbit/s over ``[0, duration_s)`` (model in the module docstring)."""
    for key, value in (("nominal_bandwidth_gbps", nominal_bandwidth_gbps), ("duration_s", duration_s),
                       ("step_s", step_s), ("corr_s", corr_s)):
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"{name}: {key} must be a finite number > 0, got {value}")
    if not (math.isfinite(cv) and cv >= 0):
        raise ValueError(f"{name}: cv must be >= 0, got {cv}")
    if not 0.0 <= floor_frac <= 1.0:
        raise ValueError(f"{name}: floor_frac must be in [0, 1], got {floor_frac}")
    n = max(1, math.ceil(duration_s / step_s - 1e-9))
    grid = step_s * np.arange(n, dtype=np.float64)
    if cv == 0.0:
        mult = np.ones(n)
    else:
        z = ar1_standard(n, step_s=step_s, corr_s=corr_s, rng=np.random.Generator(np.random.PCG64(seed)))
        sigma = math.sqrt(math.log1p(cv * cv))
        mult = np.exp(sigma * z - sigma * sigma / 2.0)
    base = Trace(grid, nominal_bandwidth_gbps * mult, unit="Gbit/s", name=name, end_s=float(duration_s),
                 meta={"generator": "bandwidth_trace", "seed": seed, "nominal_bandwidth_gbps": nominal_bandwidth_gbps,
                       "cv": cv, "corr_s": corr_s})
    return degrade(base, events, floor=floor_frac * nominal_bandwidth_gbps)


def steady_degradation(trace: Trace, frac: float, *, name: str | None = None) -> Trace:
    """The whole trace reduced by ``frac`` (0.2 = 20% less bandwidth), e.g. for sensitivity sweeps."""
    if not 0.0 <= frac < 1.0:
        raise ValueError(f"{trace.name}: degradation frac must be in [0, 1), got {frac}")
    return trace.scaled(1.0 - frac, name=name or f"{trace.name}-degraded{frac:g}")
