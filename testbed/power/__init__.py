"""GPU power caps: the backend contract (:mod:`.device`), typed errors, and NVML (:mod:`.nvml`).

``testbed.power.nvml`` imports pynvml only when used, so this package loads without a GPU.
"""

from testbed.power.device import (
    Measurement, PowerDevice, PowerLimits, PowerMeasurement, PowerNode, WindowResult,
)
from testbed.power.errors import (
    CapNotEnforced, PowerError, PowerLibraryNotFound, PowerLimitOutOfRange, PowerNotSupported,
    PowerPermissionError, map_nvml_error,
)

__all__ = [
    "CapNotEnforced", "Measurement", "PowerDevice", "PowerError", "PowerLibraryNotFound",
    "PowerLimitOutOfRange", "PowerLimits", "PowerMeasurement", "PowerNode", "PowerNotSupported",
    "PowerPermissionError", "WindowResult", "map_nvml_error",
]
