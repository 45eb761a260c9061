"""The NVML power backend: GPU power caps set, read back and metered through pynvml.

Units: NVML speaks milliwatts and millijoules; everything public here is watts and joules.

Energy: ``nvmlDeviceGetTotalEnergyConsumption`` (mJ since the driver loaded, Volta and newer)
when the GPU supports it. Otherwise the counter integrates power with the trapezoid rule over
*successive calls*: every ``power_w()`` / ``energy_j()`` reading is a sample, so the estimate is
only as good as the caller's polling (the controller reads once per step). No thread is started.

Restoring limits: :class:`NvmlNode` is a context manager. ``__enter__`` records every device's
current limit; ``__exit__`` puts them back on normal exit, on an exception and on
KeyboardInterrupt, and an ``atexit`` handler covers an interpreter exit that skips ``__exit__``.
No signal handler is installed here: the CLI (``testbed.cli``) turns SIGTERM into SystemExit in
its own process, so ``__exit__`` runs on SIGTERM too.
"""

from __future__ import annotations

import atexit
import logging
import time
import warnings
from collections.abc import Callable, Sequence
from types import ModuleType

from testbed.power.gpu.device import PowerDevice, PowerLimits, PowerNode
from testbed.power.errors import (
    NVML_ERROR_NOT_SUPPORTED, CapNotEnforced, PowerError, PowerLibraryNotFound, map_nvml_error,
)

log = logging.getLogger(__name__)
DEFAULT_TOLERANCE_W = 1.0


def _pynvml() -> ModuleType:
    try:
        with warnings.catch_warnings():  # the legacy `pynvml` wrapper warns on import
            warnings.simplefilter("ignore")
            import pynvml
    except ImportError as e:
        raise PowerLibraryNotFound("pynvml is not installed (pip install nvidia-ml-py); use the "
                                   "power.backend auto (a modelled GPU) on hosts without a GPU") from e
    return pynvml


def _call(device: str, action: str, fn: Callable, *args):
    """Call one NVML function; any NVMLError becomes a typed PowerError."""
    nvml = _pynvml()
    try:
        return fn(*args)
    except nvml.NVMLError as e:
        raise map_nvml_error(e, device=device, action=action) from e


def nvml_available() -> tuple[bool, str]:
    """Whether NVML power control can be used here, and why not. Never pretends."""
    try:
        nvml = _pynvml()
        _call("nvml", "nvmlInit", nvml.nvmlInit)
    except PowerError as e:
        return False, str(e)
    try:
        count = _call("nvml", "nvmlDeviceGetCount", nvml.nvmlDeviceGetCount)
    except PowerError as e:
        return False, str(e)
    finally:
        nvml.nvmlShutdown()
    if count == 0:
        return False, "NVML loaded but found no GPU; use power.backend auto (a modelled GPU)"
    return True, f"NVML found {count} GPU(s)"


class NvmlDevice(PowerDevice):
    """GPU ``index`` through NVML. Call :meth:`close` (or use :class:`NvmlNode`) when done."""

    def __init__(self, index: int, *, tolerance_w: float = DEFAULT_TOLERANCE_W,
                 clock: Callable[[], float] = time.monotonic):
        self._nvml = _pynvml()
        self._name = f"gpu{index}"
        self.index, self.tolerance_w, self.clock = index, tolerance_w, clock
        self._nvcall("nvmlInit", self._nvml.nvmlInit)  # NVML counts inits; close() balances it
        self._open = True
        try:
            self._handle = self._nvcall("get handle", self._nvml.nvmlDeviceGetHandleByIndex, index)
        except BaseException:
            self.close()
            raise
        self._limits: PowerLimits | None = None
        self._counter_supported: bool | None = None  # None: not probed yet
        self._last_sample: tuple[float, float] | None = None  # (t_s, power_w) for the fallback
        self._integrated_j = 0.0

    @property
    def name(self) -> str:
        return self._name

    def _nvcall(self, action: str, fn: Callable, *args):
        return _call(self._name, action, fn, *args)

    def close(self) -> None:
        if self._open:
            self._open = False
            self._nvml.nvmlShutdown()

    def limits_w(self) -> PowerLimits:
        if self._limits is None:
            min_mw, max_mw = self._nvcall("read limit constraints",
                                          self._nvml.nvmlDeviceGetPowerManagementLimitConstraints,
                                          self._handle)
            default_mw = self._nvcall("read default limit",
                                      self._nvml.nvmlDeviceGetPowerManagementDefaultLimit,
                                      self._handle)
            self._limits = PowerLimits(min_mw / 1000, max_mw / 1000, default_mw / 1000)
        return self._limits

    def limit_mw(self) -> int:
        """The management limit currently set, in milliwatts (what restore puts back)."""
        return self._nvcall("read power limit", self._nvml.nvmlDeviceGetPowerManagementLimit,
                            self._handle)

    def set_limit_mw(self, limit_mw: int) -> bool:
        """Set the raw limit unless already there; True when the driver was called."""
        if self.limit_mw() == limit_mw:
            return False
        self._nvcall(f"set power limit to {limit_mw} mW",
                     self._nvml.nvmlDeviceSetPowerManagementLimit, self._handle, limit_mw)
        return True

    def set_limit_w(self, watts: float) -> None:
        self.limits_w().check(self._name, watts)  # refused before the driver sees it
        self.set_limit_mw(round(watts * 1000))
        enforced_w = self.enforced_limit_w()
        if abs(enforced_w - watts) > self.tolerance_w:
            raise CapNotEnforced(self._name, watts, enforced_w, self.tolerance_w)

    def enforced_limit_w(self) -> float:
        return self._nvcall("read enforced limit", self._nvml.nvmlDeviceGetEnforcedPowerLimit,
                            self._handle) / 1000

    def power_w(self) -> float:
        power_w = self._nvcall("read power", self._nvml.nvmlDeviceGetPowerUsage,
                               self._handle) / 1000
        self._integrate(power_w)
        return power_w

    def _integrate(self, power_w: float) -> None:
        now_s = self.clock()
        if self._last_sample is not None:
            t0_s, p0_w = self._last_sample
            self._integrated_j += (now_s - t0_s) * (p0_w + power_w) / 2
        self._last_sample = (now_s, power_w)

    def energy_j(self) -> float:
        if self._counter_supported is not False:
            try:
                energy_mj = self._nvcall("read total energy",
                                         self._nvml.nvmlDeviceGetTotalEnergyConsumption,
                                         self._handle)
            except PowerError as e:
                if getattr(e.__cause__, "value", None) != NVML_ERROR_NOT_SUPPORTED:
                    raise
                log.info("%s: no energy counter; integrating power between readings", self._name)
                self._counter_supported = False
            else:
                self._counter_supported = True
                return energy_mj / 1000
        self.power_w()  # one more sample for the trapezoid
        return self._integrated_j


class NvmlNode(PowerNode):
    """The NVML GPUs of this node (all of them by default); restores their limits on exit."""

    def __init__(self, indices: Sequence[int] | None = None, *,
                 tolerance_w: float = DEFAULT_TOLERANCE_W,
                 clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        nvml = _pynvml()
        if indices is None:
            _call("nvml", "nvmlInit", nvml.nvmlInit)
            try:
                indices = range(_call("nvml", "nvmlDeviceGetCount", nvml.nvmlDeviceGetCount))
            finally:
                nvml.nvmlShutdown()
        self._devices: list[NvmlDevice] = []
        try:
            for i in indices:
                self._devices.append(NvmlDevice(i, tolerance_w=tolerance_w, clock=clock))
        except BaseException:
            self.close()
            raise
        self._saved_mw: dict[int, int] = {}

    @property
    def devices(self) -> Sequence[NvmlDevice]:
        return tuple(self._devices)

    def close(self) -> None:
        for d in self._devices:
            d.close()

    def __enter__(self) -> NvmlNode:
        self._saved_mw = {i: d.limit_mw() for i, d in enumerate(self._devices)}
        atexit.register(self.restore_limits)
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        atexit.unregister(self.restore_limits)
        try:
            self.restore_limits(raise_errors=exc_type is None)
        finally:
            self.close()

    def restore_limits(self, raise_errors: bool = False) -> None:
        """Put back every limit recorded at entry; tries all devices before reporting."""
        saved, self._saved_mw = self._saved_mw, {}  # a second call (atexit) is a no-op
        failures = []
        for i, limit_mw in saved.items():
            d = self._devices[i]
            try:
                d.set_limit_mw(limit_mw)
            except PowerError as e:
                failures.append(f"{d.name}: {e}")
                log.error("could not restore %s to %d mW: %s", d.name, limit_mw, e)
        if failures and raise_errors:
            raise PowerError("power limits not restored: " + "; ".join(failures))
