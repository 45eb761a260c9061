"""GPUs: the device contract, NVML, a modelled GPU, power/performance profiles, calibration and the
GPU check (a lent machine's one-shot proof of the NVML path)."""
