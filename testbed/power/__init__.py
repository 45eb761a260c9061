"""GPU power caps: the device contract (:mod:`.device`), typed errors, NVML (:mod:`.nvml`), and
the one power path of a run (:mod:`.caps`: a cap enforcer per backend, chosen by :mod:`.factory`).

Importing :mod:`.builtin` (the CLI and :mod:`.factory` do) registers the built-in power backends,
so that ``power.backend`` accepts their names; the package itself stays light (the doctor and the
qemu guest import :mod:`.cgroups` without the spec's dependencies). ``testbed.power.nvml`` imports pynvml only when used, so
this package loads without a GPU.
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
