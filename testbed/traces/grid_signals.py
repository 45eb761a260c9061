"""Carbon intensity and electricity price per site: builders of the grid-signal kinds and the dispatch.

Every kind is one entry of :data:`testbed.spec.grid_signals.GRID_SIGNALS`: its source model and its
builder. The built-ins' models are declared in the spec and name their builders below
(``"testbed.traces.grid_signals:build_csv"``, ...); a plug-in is one file:

    @register_signal_kind(MySource)         # MySource: a Strict model with kind: Literal["mine"]
    def build(src: MySource, ctx: SignalContext) -> Trace: ...

Every trace is on the scenario's step grid over ``[0, horizon_s)`` (a CSV over its data:
it must cover the run), carbon in gCO2/kWh (never negative), price in currency/kWh (negative
prices, which real markets have, are kept). :func:`build_grid_signals` builds every site's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from testbed.errors import SpecError, TraceError
from testbed.spec.grid_signals import (CARBON_UNITS, GRID_SIGNALS, PRICE_UNITS, SignalConstant, SignalCsv,
                                       SignalDaily)
from testbed.traces.base import Trace
from testbed.traces.csvtrace import load_csv
from testbed.traces.daily import daily_signal
from testbed.traces.kinds import TraceContext

__all__ = ["CARBON", "GRID_SIGNALS", "PRICE", "GridSignals", "SignalContext", "build_grid_signals",
           "build_signal", "register_signal_kind"]

CARBON = "carbon"
PRICE = "price"
_UNITS = {CARBON: ("gCO2/kWh", CARBON_UNITS, "g/kWh"), PRICE: ("currency/kWh", PRICE_UNITS, "per_kWh")}

SignalBuilder = Callable[[Any, "SignalContext"], Trace]


@dataclass(frozen=True)
class SignalContext(TraceContext):
    """A :class:`TraceContext` that also says which signal it builds (``carbon`` or ``price``)."""

    signal: str = CARBON

    @property
    def unit(self) -> str:
        return _UNITS[self.signal][0]

    def unit_factor(self, unit: str | None) -> float:
        """The factor from ``unit`` (None: the signal's default) to the signal's unit."""
        _, table, default = _UNITS[self.signal]
        return table[default if unit is None else unit]


def register_signal_kind(model: type) -> Callable[[SignalBuilder], SignalBuilder]:
    """Function decorator: the decorated ``build(src, ctx) -> Trace`` makes the traces of ``model``'s
    kind; both join :data:`GRID_SIGNALS` as one entry (the model the ``traces.carbon`` / ``traces.price`` union)."""
    return GRID_SIGNALS.implements(model)


def build_signal(src: Any, ctx: SignalContext) -> Trace:
    trace = GRID_SIGNALS.builder(src.kind)(src, ctx)
    if ctx.signal == CARBON and bool(np.any(trace.values < 0)):
        i = int(np.flatnonzero(trace.values < 0)[0])
        raise TraceError(str(getattr(src, "file", ctx.name)),
                         f"carbon intensity must be >= 0 (a negative value at t={trace.times_s[i]:g} s)")
    return trace


def build_csv(src: SignalCsv, ctx: SignalContext) -> Trace:
    """The signal of a ``kind: csv`` source (its registry entry: :class:`testbed.spec.grid_signals.SignalCsv`)."""
    sc = ctx.scenario
    return load_csv(Path(src.file), unit=ctx.unit, start=sc.start, time_column=src.time_column,
                    value_column=src.value_column, scale=src.scale * ctx.unit_factor(src.unit),
                    duration_s=sc.duration_s, step_s=ctx.step_s, name=ctx.name)


def build_daily(src: SignalDaily, ctx: SignalContext) -> Trace:
    """The signal of a ``kind: daily`` source (its registry entry: :class:`testbed.spec.grid_signals.SignalDaily`)."""
    return daily_signal(duration_s=ctx.horizon_s, step_s=ctx.step_s, start=ctx.scenario.start,
                        utc_offset_h=ctx.site.local_offset_h, mean=src.mean, amplitude_frac=src.amplitude_frac,
                        peak_h=src.peak_h, noise_cv=src.noise_cv, corr_h=src.corr_h,
                        seed=ctx.sub_seed(src.seed, ctx.signal, ctx.site_name), unit=ctx.unit, name=ctx.name)


def build_constant(src: SignalConstant, ctx: SignalContext) -> Trace:
    """The signal of a ``kind: constant`` source (its registry entry: :class:`testbed.spec.grid_signals.SignalConstant`)."""
    return Trace([0.0], [src.value], unit=ctx.unit, name=ctx.name, end_s=ctx.horizon_s,
                 meta={"generator": "constant"})


@dataclass(frozen=True)
class GridSignals:
    """Every site's carbon and price traces (empty dicts when the scenario has none)."""

    carbon_g_per_kwh: dict[str, Trace]
    price_per_kwh: dict[str, Trace]
    currency: str | None

    @staticmethod
    def step_mean(traces: dict[str, Trace], site: str, t0_s: float, t1_s: float) -> float | None:
        """Mean of ``site``'s trace over ``[t0_s, t1_s)`` (None: no trace for it)."""
        tr = traces.get(site)
        if tr is None:
            return None
        t1 = min(t1_s, tr.end_s)
        if t1 <= t0_s:
            return tr.at(min(t0_s, tr.end_s - 1e-9))
        return tr.integrate(t0_s, t1) / (t1 - t0_s)


def build_grid_signals(sc: Any, seed: int, horizon_s: float) -> GridSignals:
    """Each site's carbon and price traces; a wrong file or parameter is a SpecError naming the
    scenario field (and the file), like the renewable traces'."""
    out: dict[str, dict[str, Trace]] = {CARBON: {}, PRICE: {}}
    problems: list[tuple[str, str]] = []
    for signal in (CARBON, PRICE):
        section = getattr(sc.traces, signal, None)
        if section is None:
            continue
        for s in sc.sites:
            key = s.name if s.name in section.sites else "default"
            src = section.sites.get(key)
            if src is None:
                continue
            field = f"traces.{signal}.sites.{key}"
            ctx = SignalContext(scenario=sc, site_name=s.name, seed=seed, horizon_s=horizon_s, step_s=sc.step_s,
                                name=f"{signal}:{s.name}", signal=signal)
            try:
                out[signal][s.name] = build_signal(src, ctx)
            except ValueError as e:
                problem = (field, str(e))
            except TraceError as e:
                file_name = getattr(src, "file", None)
                if file_name and e.where == file_name:
                    problem = (f"{field}.file", f"{e.where}: {e.message}")
                else:
                    problem = (field, f"{e.message} ({e.where})")
            else:
                continue
            if problem not in problems:
                problems.append(problem)
    if problems:
        raise SpecError(problems)
    currency = sc.traces.price.currency if sc.traces.price is not None else None
    return GridSignals(out[CARBON], out[PRICE], currency)
