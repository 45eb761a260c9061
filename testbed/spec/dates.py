"""Every instant a scenario implies must be a date-time the run can compute with.

The run's tables carry absolute times (pandas ``Timestamp``, nanoseconds since 1970: years 1677
to 2262) and its traces are generated from ``start`` to one day past the end. A scenario that
starts on 9999-12-31 passes the field's own check (a valid ISO-8601 date-time) but no run can
represent it, so :func:`date_problems` refuses it at validation, naming the field: ``start``,
``duration_h`` (the end of the run and its traces), a bandwidth event's end, ``federated.max_hours``.
A day is kept clear at both ends (time zones, the traces' day past the end, local-day alignments).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

PAD_S = 86400.0
"""Generated traces (and forecasts over them) run one day past the scenario (``testbed.inputs.PAD_S``)."""

MARGIN_S = 86400.0
"""Kept clear at each end of pandas' range (local times, alignments to a day)."""

# pandas.Timestamp.min / .max (UTC), as epoch seconds; tests/unit/spec/test_spec_dates.py checks them
# against pandas (importing pandas here would slow down every command that only reads a scenario)
_PANDAS_MIN_S = -9223372036.854775
_PANDAS_MAX_S = 9223372036.854775

EARLIEST_S = _PANDAS_MIN_S + MARGIN_S
LATEST_S = _PANDAS_MAX_S - MARGIN_S


def _text(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


RANGE = f"{_text(EARLIEST_S)} to {_text(LATEST_S)}"
"""The date-times a run may touch, as shown in messages."""


def _after_last(epoch_s: float) -> bool:
    return not epoch_s <= LATEST_S  # NaN and inf included


def date_problems(sc: Any) -> list[tuple[str, str]]:
    """``(field, message)`` for each instant of ``sc`` (a validated Scenario) outside :data:`RANGE`."""
    try:
        start_s = sc.start.timestamp()
    except (OverflowError, ValueError):  # year 1 or 9999 moved across a day by its time zone
        start_s = float("nan")
    if not EARLIEST_S <= start_s <= LATEST_S:
        return [("start", f"{sc.start.isoformat()} is outside the date-times a run can represent ({RANGE})")]
    problems: list[tuple[str, str]] = []
    end_s = start_s + sc.duration_h * 3600.0
    if _after_last(end_s + PAD_S):
        problems.append(("duration_h", f"the run from {sc.start.isoformat()} would end (with its traces, which run one "
                                       f"day past the end) after {_text(LATEST_S)}, the last date-time a run can "
                                       "represent: start earlier or shorten the run"))
        return problems
    for i, ev in enumerate(sc.traces.bandwidth.events):
        if _after_last(start_s + (ev.start_h + ev.duration_h) * 3600.0):
            problems.append((f"traces.bandwidth.events[{i}].duration_h",
                             f"the event would end after {_text(LATEST_S)}, the last date-time a run can represent"))
    fl = getattr(sc, "federated", None)
    max_hours = getattr(fl, "max_hours", None)
    if max_hours is not None and _after_last(start_s + max_hours * 3600.0 + PAD_S):
        problems.append(("federated.max_hours", f"the rounds could end after {_text(LATEST_S)}, the last date-time "
                                                "a run can represent"))
    return problems
