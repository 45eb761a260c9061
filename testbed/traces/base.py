"""The one trace type: an immutable step-hold time series on scenario time.

Scenario time ``t`` is seconds (float) from the scenario start. A :class:`Trace` holds samples
``(times_s[i], values[i])`` and is a *step function*: the value at ``t`` is ``values[i]`` for
``times_s[i] <= t < times_s[i + 1]``, and the last sample holds until ``end_s``. A trace is
validated when it is built and never extrapolates: asking for a time outside
``[start_s, end_s)`` raises :class:`~testbed.errors.TraceRangeError`.

Everything is exact for a step function: :meth:`Trace.integrate` is the exact integral and
:meth:`Trace.time_to_accumulate` its exact inverse (when does a transfer of N Gbit finish
under a bandwidth trace in Gbit/s?). Threshold queries (:meth:`Trace.windows_above`,
:meth:`Trace.remaining_above`) precompute the window boundaries once per threshold, lazily, so
that scalar lookups cost a bisection.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
import pandas as pd

from testbed.errors import TraceError, TraceRangeError
from testbed.traces.steps import accumulate_until, runs_above, validated_arrays

__all__ = ["Trace"]

_MAX_CACHED_THRESHOLDS = 64


def _restore(times: np.ndarray, values: np.ndarray, unit: str, name: str, end_s: float,
             meta: dict[str, Any]) -> Trace:
    return Trace(times, values, unit=unit, name=name, end_s=end_s, meta=meta)


def _frozen(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


class Trace:
    """Immutable step-hold time series (see the module docstring for the semantics).

    ``meta`` is an optional read-only mapping of provenance (seed, source file, model used)
    that derived traces keep and recorders may write out.
    """

    __slots__ = ("_times", "_values", "_end", "_unit", "_name", "_meta", "_cache")

    def __init__(
        self,
        times_s: Any,
        values: Any,
        *,
        unit: str,
        name: str,
        end_s: float | None = None,
        meta: Mapping[str, Any] | None = None,
    ):
        if not isinstance(name, str) or not name:
            raise TraceError("<unnamed trace>", "a trace needs a non-empty name")
        if not isinstance(unit, str):
            raise TraceError(name, f"unit must be a string, got {unit!r}")
        times, vals, end = validated_arrays(times_s, values, end_s, name)
        set_ = object.__setattr__
        set_(self, "_times", _frozen(times))
        set_(self, "_values", _frozen(vals))
        set_(self, "_end", end)
        set_(self, "_unit", unit)
        set_(self, "_name", name)
        set_(self, "_meta", MappingProxyType(dict(meta or {})))
        set_(self, "_cache", {})

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError(f"Trace is immutable (cannot set {key!r})")

    # ------------------------------------------------------------------ basic properties
    @property
    def times_s(self) -> np.ndarray:
        """Sample times (read-only array)."""
        return self._times

    @property
    def values(self) -> np.ndarray:
        """Sample values (read-only array)."""
        return self._values

    @property
    def unit(self) -> str:
        return self._unit

    @property
    def name(self) -> str:
        return self._name

    @property
    def meta(self) -> Mapping[str, Any]:
        return self._meta

    @property
    def start_s(self) -> float:
        return float(self._times[0])

    @property
    def end_s(self) -> float:
        return self._end

    @property
    def edges_s(self) -> np.ndarray:
        """Segment boundaries: ``times_s`` followed by ``end_s`` (length ``len(self) + 1``)."""
        if "edges" not in self._cache:
            self._cache["edges"] = _frozen(np.append(self._times, self._end))
        return self._cache["edges"]

    def __len__(self) -> int:
        return int(self._times.size)

    def __repr__(self) -> str:
        return (
            f"Trace(name={self._name!r}, unit={self._unit!r}, samples={len(self)}, "
            f"start_s={self.start_s:g}, end_s={self._end:g})"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Trace):
            return NotImplemented
        return (
            self._unit == other._unit
            and self._end == other._end
            and np.array_equal(self._times, other._times)
            and np.array_equal(self._values, other._values)
        )

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # The default pickling sets slots one by one, which __setattr__ forbids.
        return (_restore, (self._times, self._values, self._unit, self._name, self._end, dict(self._meta)))

    # ------------------------------------------------------------------ lookups
    def _lists(self) -> tuple[list[float], list[float]]:
        # Python lists make scalar bisection ~10x cheaper than np.searchsorted on a scalar.
        if "lists" not in self._cache:
            self._cache["lists"] = (self._times.tolist(), self._values.tolist())
        return self._cache["lists"]

    def _index(self, t: float) -> int:
        times, _ = self._lists()
        if not (times[0] <= t < self._end):  # also rejects NaN
            raise TraceRangeError(
                f"{self._name}: t={t} is outside the trace range [{times[0]}, {self._end})"
            )
        return bisect_right(times, t) - 1

    def at(self, t: float) -> float:
        """Value at scenario time ``t`` (raises TraceRangeError outside ``[start_s, end_s)``)."""
        return self._lists()[1][self._index(t)]

    def _indices(self, ts: np.ndarray, *, closed_end: bool = False) -> np.ndarray:
        ts = np.asarray(ts, dtype=np.float64)
        upper_ok = ts <= self._end if closed_end else ts < self._end
        ok = (ts >= self._times[0]) & upper_ok
        if not np.all(ok):
            bad = ts[~ok].ravel()[0]
            raise TraceRangeError(
                f"{self._name}: t={bad} is outside the trace range [{self.start_s}, {self._end})"
            )
        idx = np.searchsorted(self._times, ts, side="right") - 1
        return idx

    def at_many(self, ts: np.ndarray) -> np.ndarray:
        """Vectorised :meth:`at` (same shape as ``ts``)."""
        return self._values[self._indices(ts)]

    # ------------------------------------------------------------------ integrals
    def _cum(self) -> np.ndarray:
        """Integral from ``start_s`` to each edge (length ``len(self) + 1``)."""
        if "cum" not in self._cache:
            areas = self._values * np.diff(self.edges_s)
            self._cache["cum"] = _frozen(np.concatenate(([0.0], np.cumsum(areas))))
        return self._cache["cum"]

    def _check_closed(self, t: float) -> None:
        if not (self._times[0] <= t <= self._end):
            raise TraceRangeError(
                f"{self._name}: t={t} is outside the trace range [{self.start_s}, {self._end}]"
            )

    def integrate(self, t0_s: float, t1_s: float) -> float:
        """Exact integral of the step function over ``[t0_s, t1_s]`` (negative if t1 < t0)."""
        if t1_s < t0_s:
            return -self.integrate(t1_s, t0_s)
        self._check_closed(t0_s)
        self._check_closed(t1_s)
        times, vals = self._lists()
        i0 = max(bisect_right(times, t0_s) - 1, 0)
        i1 = max(bisect_right(times, t1_s) - 1, 0)
        if i0 == i1:
            return vals[i0] * (t1_s - t0_s)
        edges = self.edges_s
        cum = self._cum()
        first = vals[i0] * (float(edges[i0 + 1]) - t0_s)
        middle = float(cum[i1] - cum[i0 + 1])
        last = vals[i1] * (t1_s - times[i1])
        return first + middle + last

    def integrate_many(self, t0_s: np.ndarray, t1_s: np.ndarray) -> np.ndarray:
        """Vectorised :meth:`integrate` via the cumulative integral (t0, t1 broadcast)."""
        return self._cumulative(t1_s) - self._cumulative(t0_s)

    def _cumulative(self, ts: np.ndarray) -> np.ndarray:
        ts = np.asarray(ts, dtype=np.float64)
        idx = np.minimum(self._indices(ts, closed_end=True), len(self) - 1)
        return self._cum()[idx] + self._values[idx] * (ts - self._times[idx])

    def time_to_accumulate(self, t0_s: float, amount: float) -> float:
        """Earliest ``t >= t0_s`` with ``integrate(t0_s, t) == amount`` (exact for a step function).

        Needs non-negative values. Zero-valued stretches are skipped over; ``amount == 0``
        returns ``t0_s``. Raises TraceRangeError if the amount is not accumulated by ``end_s``
        (reaching it exactly at ``end_s`` returns ``end_s``).
        """
        if not (math.isfinite(amount) and amount >= 0):
            raise ValueError(f"{self._name}: amount must be finite and >= 0, got {amount}")
        if "nonneg" not in self._cache:
            self._cache["nonneg"] = bool(np.all(self._values >= 0))
        if not self._cache["nonneg"]:
            raise TraceError(self._name, "time_to_accumulate needs a trace with non-negative values")
        self._check_closed(t0_s)
        if amount == 0:
            return float(t0_s)
        times, vals = self._lists()
        t = accumulate_until(times, vals, self.edges_s, self._cum(), t0_s, amount)
        if t is None:
            raise TraceRangeError(
                f"{self._name}: {amount} {self._unit}*s cannot be accumulated from t={t0_s} "
                f"before end_s={self._end} (only {self.integrate(t0_s, self._end)} available)"
            )
        return t

    # ------------------------------------------------------------------ thresholds
    def _runs(self, threshold: float) -> tuple[list[tuple[float, float]], list[float]]:
        """(maximal windows, per-segment end of the window containing it or NaN)."""
        if math.isnan(threshold):
            raise ValueError(f"{self._name}: threshold must not be NaN")
        cache = self._cache.setdefault("runs", {})
        hit = cache.get(threshold)
        if hit is None:
            if len(cache) >= _MAX_CACHED_THRESHOLDS:
                cache.clear()
            hit = cache[threshold] = runs_above(self._values, self.edges_s, float(threshold))
        return hit

    def windows_above(self, threshold: float) -> list[tuple[float, float]]:
        """Maximal ``(start_s, end_s)`` intervals where the value is ``>= threshold``."""
        return list(self._runs(threshold)[0])

    def remaining_above(self, t: float, threshold: float) -> float:
        """Seconds from ``t`` until the value drops below ``threshold``.

        0 if it is below now; ``end_s - t`` if it stays at or above the threshold to the end.
        """
        i = self._index(t)
        end = self._runs(threshold)[1][i]
        return 0.0 if end != end else end - t  # NaN check without a function call

    # ------------------------------------------------------------------ derived traces
    def _derive(self, times: np.ndarray, values: np.ndarray, *, end_s: float | None = None,
                name: str | None = None, unit: str | None = None) -> Trace:
        return Trace(times, values, unit=self._unit if unit is None else unit,
                     name=self._name if name is None else name,
                     end_s=self._end if end_s is None else end_s, meta=self._meta)

    def resample(self, step_s: float, start_s: float | None = None, end_s: float | None = None,
                 *, how: str = "sample", name: str | None = None) -> Trace:
        """Resample onto the grid ``start_s, start_s + step_s, ...`` ending at ``end_s``.

        ``how="sample"`` takes the step-hold value at each grid point; ``how="mean"`` takes the
        exact mean over each grid cell (energy-preserving; the last cell may be shorter).
        """
        if not (math.isfinite(step_s) and step_s > 0):
            raise ValueError(f"{self._name}: step_s must be > 0, got {step_s}")
        t0 = self.start_s if start_s is None else float(start_s)
        t1 = self._end if end_s is None else float(end_s)
        if not (t0 < t1):
            raise ValueError(f"{self._name}: resample needs start_s < end_s (got {t0}, {t1})")
        if t0 < self.start_s or t1 > self._end:
            raise TraceRangeError(
                f"{self._name}: resample range [{t0}, {t1}) is outside the trace range "
                f"[{self.start_s}, {self._end})"
            )
        n = max(1, math.ceil((t1 - t0) / step_s - 1e-9))
        grid = t0 + step_s * np.arange(n, dtype=np.float64)
        if how == "sample":
            vals = self.at_many(grid)
        elif how == "mean":
            hi = np.append(grid[1:], t1)
            vals = self.integrate_many(grid, hi) / (hi - grid)
        else:
            raise ValueError(f"{self._name}: how must be 'sample' or 'mean', got {how!r}")
        return self._derive(grid, vals, end_s=t1, name=name)

    def sliced(self, start_s: float, end_s: float, *, name: str | None = None) -> Trace:
        """The same step function restricted to ``[start_s, end_s)`` (breakpoints kept)."""
        if not (self.start_s <= start_s < end_s <= self._end):
            raise TraceRangeError(
                f"{self._name}: slice [{start_s}, {end_s}) is outside the trace range "
                f"[{self.start_s}, {self._end})"
            )
        i0 = self._index(start_s)
        i1 = int(np.searchsorted(self._times, end_s, side="left"))
        times = np.concatenate(([start_s], self._times[i0 + 1:i1]))
        return self._derive(times, self._values[i0:i1], end_s=end_s, name=name)

    def shifted(self, offset_s: float, *, name: str | None = None) -> Trace:
        """The same trace with every time moved by ``offset_s``."""
        return self._derive(self._times + offset_s, self._values, end_s=self._end + offset_s, name=name)

    def scaled(self, factor: float, *, unit: str | None = None, name: str | None = None) -> Trace:
        """Values multiplied by ``factor`` (optionally relabelled with a new unit)."""
        if not math.isfinite(factor):
            raise ValueError(f"{self._name}: factor must be finite, got {factor}")
        return self._derive(self._times, self._values * factor, unit=unit, name=name)

    def clipped(self, lo: float | None = None, hi: float | None = None, *, name: str | None = None) -> Trace:
        """Values clipped to ``[lo, hi]`` (either bound may be None)."""
        if lo is not None and hi is not None and lo > hi:
            raise ValueError(f"{self._name}: clip bounds reversed ({lo} > {hi})")
        return self._derive(self._times, np.clip(self._values, lo, hi), name=name)

    # ------------------------------------------------------------------ frames and files
    def to_frame(self) -> pd.DataFrame:
        """DataFrame with columns ``time_s`` and ``value``; ``attrs`` holds end_s, unit, name."""
        df = pd.DataFrame({"time_s": self._times.copy(), "value": self._values.copy()})
        df.attrs.update(end_s=self._end, unit=self._unit, name=self._name)
        return df

    @classmethod
    def from_frame(cls, df: pd.DataFrame, *, unit: str, name: str, time_column: str = "time_s",
                   value_column: str = "value", end_s: float | None = None,
                   meta: Mapping[str, Any] | None = None) -> Trace:
        """Build from a DataFrame of numeric seconds; ``end_s`` defaults to ``df.attrs['end_s']``."""
        from testbed.traces.fileerrors import missing_column, numeric_column

        for col in (time_column, value_column):
            if col not in df.columns:
                raise TraceError(name, missing_column(col, len(df.columns)))
        if end_s is None:
            end_s = df.attrs.get("end_s")
        times = numeric_column(df[time_column], time_column, name)
        vals = numeric_column(df[value_column], value_column, name)
        return cls(times, vals, unit=unit, name=name, end_s=end_s, meta=meta)

    @classmethod
    def from_csv(cls, path: str | Path, *, unit: str, name: str | None = None,
                 time_column: str = "time_s", value_column: str = "value",
                 end_s: float | None = None) -> Trace:
        """Read a CSV of numeric seconds (``time_s,value``). For ISO timestamps use
        :func:`testbed.traces.csvtrace.load_csv`."""
        from testbed.traces.fileerrors import check_header_line, read_failure

        path = Path(path)
        check_header_line(path, str(path))
        try:
            df = pd.read_csv(path)
        except (OSError, ValueError, pd.errors.ParserError, UnicodeDecodeError) as e:
            raise TraceError(str(path), f"cannot read CSV: {read_failure(e)}") from None
        try:
            return cls.from_frame(df, unit=unit, name=name or path.stem, time_column=time_column,
                                  value_column=value_column, end_s=end_s, meta={"source": str(path)})
        except TraceError as e:
            raise TraceError(str(path), e.message) from e
