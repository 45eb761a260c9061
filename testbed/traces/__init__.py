"""Traces: immutable step-hold time series on scenario time, their loaders and generators.

Scenario time ``t`` is seconds from the scenario start. Loaders of real data take the
scenario's absolute (timezone-aware) start to align absolute timestamps; generators are
reproducible from their seed. Every trace validates at construction and never extrapolates.

Each renewable trace kind is one entry of :data:`TRACE_KINDS` (its source model and its builder,
:mod:`testbed.traces.kinds`); the built-ins' entries are declared with their models in the spec and
name their builders in this package (each file's ``build``), so nothing here needs importing first.
"""

from testbed.traces.bandwidth import DegradationEvent, bandwidth_trace, degrade, steady_degradation
from testbed.traces.base import Trace
from testbed.traces.caiso import load_caiso
from testbed.traces.csvtrace import load_csv
from testbed.traces.google import google_epoch, google_trace_start, load_google_power
from testbed.traces.google_synthetic import google_like_power
from testbed.traces.grid_signals import GridSignals, build_grid_signals
from testbed.traces.kinds import TRACE_KINDS, TraceContext, build_renewable, register_trace_kind
from testbed.traces.solar import solar_power
from testbed.traces.windows import Window, auto_offsets_h, curtailment_windows, draw_windows

__all__ = [
    "TRACE_KINDS",
    "DegradationEvent",
    "Trace",
    "TraceContext",
    "GridSignals",
    "Window",
    "auto_offsets_h",
    "build_grid_signals",
    "bandwidth_trace",
    "build_renewable",
    "curtailment_windows",
    "degrade",
    "draw_windows",
    "google_epoch",
    "google_like_power",
    "google_trace_start",
    "load_caiso",
    "load_csv",
    "load_google_power",
    "register_trace_kind",
    "solar_power",
    "steady_degradation",
]
