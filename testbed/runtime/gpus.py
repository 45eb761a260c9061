"""Whether containers get this machine's GPUs: a Docker device request (``--gpus all``) when NVIDIA
GPUs answer NVML *and* the engine can honour it (the NVIDIA container toolkit's prestart hook,
``nvidia-container-runtime-hook``, on the PATH: dockerd 20.10 looks for it by that name);
otherwise no request, and a note that says why when there are GPUs the containers will not see."""

from __future__ import annotations

import os
import shutil

TOOLKIT_HOOK = "nvidia-container-runtime-hook"


def nvidia_gpus() -> int:
    """How many NVIDIA GPUs NVML sees here (0 without pynvml, driver or GPU)."""
    try:
        import pynvml
    except ImportError:
        return 0
    try:
        pynvml.nvmlInit()
        try:
            return int(pynvml.nvmlDeviceGetCount())
        finally:
            pynvml.nvmlShutdown()
    except pynvml.NVMLError:
        return 0


def gpu_request(n_gpus: int | None = None, hook: str | None = None) -> tuple[str | None, str | None]:
    """(``--gpus`` value or None, a note or None)."""
    n = nvidia_gpus() if n_gpus is None else n_gpus
    if n == 0:
        return None, None
    found = hook if hook is not None else shutil.which(TOOLKIT_HOOK, path=os.environ.get("PATH", "") + ":/usr/bin:/usr/local/bin")
    if not found:
        return None, (f"{n} NVIDIA GPU(s) here, but the engine cannot pass them to containers: no {TOOLKIT_HOOK} "
                      "(install NVIDIA's nvidia-container-toolkit); the containers run without GPUs")
    return "all", None
