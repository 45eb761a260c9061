"""The NVML functions the power backend calls: what the unit tests patch (autospec)."""

NVML_FUNCS = [
    "nvmlInit", "nvmlShutdown", "nvmlDeviceGetCount", "nvmlDeviceGetHandleByIndex",
    "nvmlDeviceGetPowerManagementLimitConstraints", "nvmlDeviceGetPowerManagementDefaultLimit",
    "nvmlDeviceGetPowerManagementLimit", "nvmlDeviceSetPowerManagementLimit",
    "nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetPowerUsage",
    "nvmlDeviceGetTotalEnergyConsumption",
]
