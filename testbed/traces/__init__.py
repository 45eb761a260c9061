"""Traces: immutable step-hold time series on scenario time, their loaders and generators.

Scenario time ``t`` is seconds from the scenario start. Loaders of real data take the
scenario's absolute (timezone-aware) start to align absolute timestamps; generators are
reproducible from their seed. Every trace validates at construction and never extrapolates.
"""

from testbed.traces.bandwidth import DegradationEvent, bandwidth_trace, degrade, steady_degradation
from testbed.traces.base import Trace
from testbed.traces.caiso import load_caiso
from testbed.traces.csvtrace import load_csv
from testbed.traces.google import google_epoch, google_trace_start, load_google_power
from testbed.traces.solar import solar_power
from testbed.traces.windows import Window, auto_offsets_h, curtailment_windows, draw_windows

__all__ = [
    "DegradationEvent",
    "Trace",
    "Window",
    "auto_offsets_h",
    "bandwidth_trace",
    "curtailment_windows",
    "degrade",
    "draw_windows",
    "google_epoch",
    "google_trace_start",
    "load_caiso",
    "load_csv",
    "load_google_power",
    "solar_power",
    "steady_degradation",
]
