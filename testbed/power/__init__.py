"""GPU power caps. Three parts: the one power path of a run (here: :mod:`.caps`, a cap enforcer per
backend registered in :mod:`.backends` and chosen by :mod:`.factory`; the site budget and grid limit),
GPUs (:mod:`.gpu`: the device contract, NVML, a modelled GPU, profiles, calibration, the GPU check)
and CPU throttles that hold real training to a cap's throughput (:mod:`.throttle`).

Importing :mod:`.builtin` (the scenario model does) registers the built-in power backends,
so that ``power.backend`` accepts their names; the package itself stays light (the doctor and the
qemu guest import :mod:`.throttle.cgroups` without the spec's dependencies). ``testbed.power.gpu.nvml`` imports pynvml only when used, so
this package loads without a GPU.
"""

from testbed.power.gpu.device import (
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
