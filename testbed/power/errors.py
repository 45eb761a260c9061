"""Typed power errors, and the one place NVML error codes become them.

NVML reports every failure as ``pynvml.NVMLError`` carrying a numeric ``value``; callers of this
package only ever see a :class:`PowerError` subclass, raised ``from`` the NVML error so the
original code stays in the traceback. The codes are the stable ``nvmlReturn_t`` values of the C
API, so this module does not need pynvml to be importable.
"""

from __future__ import annotations

from testbed.errors import TestbedError

# nvmlReturn_t values (nvml.h); pynvml exposes the same numbers as NVML_ERROR_*.
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_LIBRARY_NOT_FOUND = 12


class PowerError(TestbedError):
    """A GPU power cap could not be read, set or measured."""


class PowerPermissionError(PowerError):
    """NVML refused a change: setting power limits needs root (or CAP_SYS_ADMIN)."""


class PowerNotSupported(PowerError):
    """The device or driver does not support the requested power operation."""


class PowerLibraryNotFound(PowerError):
    """No NVIDIA driver / NVML library (or no pynvml): use power.backend auto (a modelled GPU) instead."""


class PowerLimitOutOfRange(PowerError):
    """A requested cap lies outside the device's [min_w, max_w]; nothing was sent to the driver."""

    def __init__(self, device: str, requested_w: float, min_w: float, max_w: float):
        self.device, self.requested_w, self.min_w, self.max_w = device, requested_w, min_w, max_w
        super().__init__(f"{device}: power cap {requested_w:g} W is outside the device range "
                         f"[min_w={min_w:g} W, max_w={max_w:g} W]")


class CapNotEnforced(PowerError):
    """The enforced limit read back after a set differs from the request beyond tolerance."""

    def __init__(self, device: str, requested_w: float, enforced_w: float, tolerance_w: float):
        self.device, self.requested_w, self.enforced_w = device, requested_w, enforced_w
        self.tolerance_w = tolerance_w
        super().__init__(f"{device}: requested cap {requested_w:g} W but the enforced limit is "
                         f"{enforced_w:g} W (tolerance {tolerance_w:g} W); another limit "
                         "(system, thermal or another tool) is in force")


def map_nvml_error(e: BaseException, *, device: str = "nvml", action: str = "call") -> PowerError:
    """The typed :class:`PowerError` for an NVML error; raise it with ``raise ... from e``."""
    value = getattr(e, "value", None)
    where = f"{device}: {action} failed"
    if value == NVML_ERROR_NO_PERMISSION:
        return PowerPermissionError(f"{where}: NVML NO_PERMISSION — setting GPU power limits "
                                    "needs root (or CAP_SYS_ADMIN)")
    if value == NVML_ERROR_NOT_SUPPORTED:
        return PowerNotSupported(f"{where}: NVML NOT_SUPPORTED — this GPU or driver does not "
                                 "support it")
    if value in (NVML_ERROR_LIBRARY_NOT_FOUND, NVML_ERROR_DRIVER_NOT_LOADED):
        return PowerLibraryNotFound(f"{where}: NVML library or NVIDIA driver not found ({e}); "
                                    "use power.backend auto (a modelled GPU) on hosts without a GPU")
    return PowerError(f"{where}: NVML error {value} ({e})")
