"""CAISO ``Date, Hour, Interval`` labels -> absolute interval start times (DST-aware).

CAISO publishes in Pacific prevailing time (America/Los_Angeles) with *hour-ending* labels:
``Hour`` h covers local ``[h-1:00, h:00)``, ``Interval`` i (1-12) its i-th 5-minute slot, so a
row starts at ``Date + (Hour - 1) h + (Interval - 1) * 5 min`` local time.

Rules at daylight-saving changes, ``hour_labels="wall"`` (default; CAISO's convention: its
short-day notices say "there will be no HE3"):

* spring forward (23-hour day): local 02:00-03:00 does not exist, so ``Hour 3`` rows describe no
  time. They are dropped and counted (the loaders record the count in ``meta``). Hours 1-2 and
  4-24 map normally.
* fall back (25-hour day): local 01:00-02:00 (``Hour 2``) happens twice. The first row of a given
  ``(Date, Hour 2, Interval[, extra key])`` is the first pass (PDT), a repeat of the same key is
  the second pass (PST); more than two is an error. ``Hour 25`` on that day is also accepted
  and means the repeated hour (the NYISO-style "HE25" label), i.e. the PST pass of 01:00-02:00.
* ``Hour 25`` on any other day, or ``Hour`` outside 1-25 / ``Interval`` outside 1-12, is an error.

``hour_labels="ordinal"``: hours count elapsed hours from local midnight (1-23 on the short day,
1-25 on the long day), i.e. start = local midnight + (Hour - 1) h + (Interval - 1) * 5 min in
absolute time; an hour beyond the day's length is an error.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from testbed.errors import TraceError

__all__ = ["CAISO_TZ", "interval_starts_utc", "day_lengths_h"]

CAISO_TZ = "America/Los_Angeles"
HOUR_LABELS = ("wall", "ordinal")


def day_lengths_h(dates: pd.DatetimeIndex, tz: str = CAISO_TZ) -> np.ndarray:
    """Length in hours (23, 24 or 25) of each local calendar day (naive midnight dates)."""
    d = pd.DatetimeIndex(dates)
    # Midnight is never ambiguous or missing in America/Los_Angeles (changes happen at 02:00).
    a = d.tz_localize(tz)
    b = (d + pd.Timedelta(days=1)).tz_localize(tz)
    return np.rint(np.asarray((b - a).total_seconds()) / 3600.0).astype(np.int64)


def interval_starts_utc(dates: pd.Series, hours: np.ndarray, intervals: np.ndarray, *,
                        repeat_key: pd.DataFrame | None, hour_labels: str, where: str,
                        first_row: int = 0) -> tuple[pd.DatetimeIndex, np.ndarray]:
    """UTC start of each row and a mask of rows that exist (False: spring-forward ``Hour 3``).

    ``dates`` are naive midnights; ``repeat_key`` holds extra columns (e.g. ``Reason``) that
    distinguish rows which may legitimately repeat an interval. ``first_row`` is the file row
    number of the first data row, for error messages.
    """
    if hour_labels not in HOUR_LABELS:
        raise ValueError(f"{where}: hour_labels must be one of {HOUR_LABELS}, got {hour_labels!r}")
    d = pd.DatetimeIndex(dates)
    hours = np.asarray(hours, dtype=np.int64)
    intervals = np.asarray(intervals, dtype=np.int64)

    def fail(mask: np.ndarray, what: str) -> None:
        i = int(np.flatnonzero(mask)[0])
        raise TraceError(where, f"row {first_row + i}: {what} (Date {d[i].date()}, Hour {hours[i]}, "
                                f"Interval {intervals[i]})")

    if np.any((intervals < 1) | (intervals > 12)):
        fail((intervals < 1) | (intervals > 12), "Interval must be 1-12")
    if np.any((hours < 1) | (hours > 25)):
        fail((hours < 1) | (hours > 25), "Hour must be 1-24 (25 on a fall-back day)")
    udays, inverse = np.unique(d.to_numpy(), return_inverse=True)
    day_len = day_lengths_h(pd.DatetimeIndex(udays))[inverse]
    offset = pd.to_timedelta(intervals - 1, unit="m") * 5

    if hour_labels == "ordinal":
        if np.any(hours > day_len):
            fail(hours > day_len, "Hour beyond the length of that (DST) day")
        midnight = d.tz_localize(CAISO_TZ)
        starts = midnight + pd.to_timedelta(hours - 1, unit="h") + offset
        return starts.tz_convert("UTC"), np.ones(hours.size, dtype=bool)

    long_day = day_len == 25
    if np.any((hours == 25) & ~long_day):
        fail((hours == 25) & ~long_day, "Hour 25 on a day that is not a fall-back day")
    cols = {"d": d, "h": np.where(hours == 25, 2, hours), "i": intervals}
    frame = pd.DataFrame(cols)
    if repeat_key is not None:
        for k, c in enumerate(repeat_key.columns):
            frame[f"k{k}"] = repeat_key[c].astype(str).to_numpy()
    # Hour-25 rows are the second pass: count them after the Hour-2 rows of the same key.
    order = np.argsort(hours == 25, kind="stable")
    occurrence = np.empty(hours.size, dtype=np.int64)
    occurrence[order] = frame.iloc[order].groupby(list(frame.columns), dropna=False, sort=False).cumcount()
    repeated_hour = long_day & (cols["h"] == 2)
    if np.any(repeated_hour & (occurrence > 1)):
        fail(repeated_hour & (occurrence > 1), "the repeated hour 01:00-02:00 is listed more than twice")
    first_pass = ~((repeated_hour & (occurrence == 1)) | (hours == 25))
    naive = d + pd.to_timedelta(cols["h"] - 1, unit="h") + offset
    local = pd.DatetimeIndex(naive).tz_localize(CAISO_TZ, ambiguous=first_pass, nonexistent="NaT")
    exists = ~np.asarray(local.isna())
    return local.tz_convert("UTC"), exists
