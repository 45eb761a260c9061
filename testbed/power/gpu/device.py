"""The power backend contract: one ABC for a device, one for a node (its collection).

Modelled on zeus (``zeus/device/gpu``): units in every name, idempotent setters, typed errors.
Backends (NVML, emulated) implement the few abstract methods; the window measurement below is
shared. Energy is a monotonically increasing counter in joules; a window is the difference of
two readings, never a sum of powers guessed by the caller.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from testbed.power.errors import PowerError, PowerLimitOutOfRange


@dataclass(frozen=True)
class PowerLimits:
    """The range a cap may take and the driver's default, in watts."""

    min_w: float
    max_w: float
    default_w: float

    def check(self, device: str, watts: float) -> None:
        """Raise :class:`PowerLimitOutOfRange` when ``watts`` is outside [min_w, max_w]."""
        if not (self.min_w <= watts <= self.max_w):  # also refuses NaN
            raise PowerLimitOutOfRange(device, watts, self.min_w, self.max_w)


@dataclass(frozen=True)
class PowerMeasurement:
    """What one measurement window cost: its length, energy and mean power."""

    t_s: float
    energy_j: float
    mean_power_w: float


Measurement = PowerMeasurement  # the short name used in the issue


class WindowResult:
    """Filled in when a :meth:`_Meter.measure` block ends; ``measurement`` is None until then."""

    measurement: PowerMeasurement | None = None


class _Meter(ABC):
    """Named measurement windows over ``energy_j()`` and a monotonic clock."""

    clock: Callable[[], float] = staticmethod(time.monotonic)

    @abstractmethod
    def energy_j(self) -> float:
        """Energy consumed so far, in joules; never decreases."""

    def begin_window(self, window: str) -> None:
        windows = self.__dict__.setdefault("_windows", {})
        if window in windows:
            raise PowerError(f"measurement window {window!r} is already open")
        windows[window] = (self.clock(), self.energy_j())

    def end_window(self, window: str) -> PowerMeasurement:
        windows = self.__dict__.setdefault("_windows", {})
        if window not in windows:
            raise PowerError(f"measurement window {window!r} was never begun")
        t0_s, e0_j = windows.pop(window)
        t_s, energy_j = self.clock() - t0_s, self.energy_j() - e0_j
        return PowerMeasurement(t_s, energy_j, energy_j / t_s if t_s > 0 else 0.0)

    @contextmanager
    def measure(self, window: str) -> Iterator[WindowResult]:
        """``with meter.measure("step") as w: ...`` then ``w.measurement``."""
        result = WindowResult()
        self.begin_window(window)
        try:
            yield result
        finally:
            result.measurement = self.end_window(window)


class PowerDevice(_Meter):
    """One power-cappable device (a GPU)."""

    @property
    @abstractmethod
    def name(self) -> str:
        """A short predictable name, e.g. ``gpu0``."""

    @abstractmethod
    def limits_w(self) -> PowerLimits: ...

    @abstractmethod
    def set_limit_w(self, watts: float) -> None:
        """Cap the device at ``watts``; no driver call when it is already capped there."""

    @abstractmethod
    def enforced_limit_w(self) -> float: ...

    @abstractmethod
    def power_w(self) -> float: ...


class PowerNode(_Meter):
    """Every power device of one node. Readings are summed; a node cap is split evenly.

    ``set_limit_w(total_w)`` gives each of the n devices ``total_w / n`` so that the node's
    enforced total equals the request, each share checked against that device's own range.
    """

    @property
    @abstractmethod
    def devices(self) -> Sequence[PowerDevice]: ...

    @property
    def name(self) -> str:
        return "+".join(d.name for d in self.devices)

    def limits_w(self) -> PowerLimits:
        per = [d.limits_w() for d in self.devices]
        return PowerLimits(sum(p.min_w for p in per), sum(p.max_w for p in per),
                           sum(p.default_w for p in per))

    def set_limit_w(self, watts: float) -> None:
        devices = self.devices
        if not devices:
            raise PowerError(f"{self.name or 'node'}: no power devices to cap")
        share_w = watts / len(devices)
        for d in devices:  # validate every share before the first driver call
            d.limits_w().check(d.name, share_w)
        for d in devices:
            d.set_limit_w(share_w)

    def enforced_limit_w(self) -> float:
        return sum(d.enforced_limit_w() for d in self.devices)

    def power_w(self) -> float:
        return sum(d.power_w() for d in self.devices)

    def energy_j(self) -> float:
        return sum(d.energy_j() for d in self.devices)
