"""A GPU behind a mocked pynvml, kept in a JSON file so that several processes see the same GPU.

``python -m tests.unit.fake_nvml STATE.json -m MODULE ARGS...`` (or ``-c CODE``) replaces pynvml's
functions in that process with ones that read and write STATE, then runs MODULE (as ``python -m``
would) or CODE. The NVML path of the testbed is exercised only this way on hosts without an NVIDIA
GPU: nothing here is a real driver.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
from pathlib import Path

NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3


def write_no_gpu(path: Path) -> None:
    """NVML loads and finds no GPU (a machine with the driver's library and no device)."""
    _write(path, {"gpus": []})


def write_state(path: Path, *, limit_mw: int = 300_000, min_mw: int = 100_000, max_mw: int = 400_000,
                default_mw: int = 350_000, draw_mw: int = 250_000) -> None:
    _write(path, {"gpus": [{"limit_mw": limit_mw, "min_mw": min_mw, "max_mw": max_mw,
                            "default_mw": default_mw, "draw_mw": draw_mw, "sets": []}]})


def read_limit_mw(path: Path, index: int = 0) -> int:
    return json.loads(Path(path).read_text())["gpus"][index]["limit_mw"]


def _write(path: Path, state: dict) -> None:
    tmp = Path(f"{path}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(state))
    os.replace(tmp, path)


def install(path: Path) -> None:
    """Patch pynvml in this process (its NVMLError class stays the real one)."""
    import pynvml

    def state() -> dict:
        return json.loads(Path(path).read_text())

    def gpu(h: int) -> dict:
        return state()["gpus"][h]

    def set_limit(h: int, mw: int) -> None:
        s = state()
        g = s["gpus"][h]
        if not g["min_mw"] <= mw <= g["max_mw"]:
            raise pynvml.NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        g["limit_mw"] = int(mw)
        g["sets"].append(int(mw))
        _write(path, s)

    def handle(i: int) -> int:
        if not 0 <= int(i) < len(state()["gpus"]):  # as NVML answers an index past its GPUs
            raise pynvml.NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return int(i)

    def no_counter(h: int) -> int:
        raise pynvml.NVMLError(NVML_ERROR_NOT_SUPPORTED)

    funcs = {
        "nvmlInit": lambda: None, "nvmlShutdown": lambda: None,
        "nvmlDeviceGetCount": lambda: len(state()["gpus"]),
        "nvmlDeviceGetHandleByIndex": handle,
        "nvmlDeviceGetPowerManagementLimitConstraints": lambda h: [gpu(h)["min_mw"], gpu(h)["max_mw"]],
        "nvmlDeviceGetPowerManagementDefaultLimit": lambda h: gpu(h)["default_mw"],
        "nvmlDeviceGetPowerManagementLimit": lambda h: gpu(h)["limit_mw"],
        "nvmlDeviceSetPowerManagementLimit": set_limit,
        "nvmlDeviceGetEnforcedPowerLimit": lambda h: gpu(h)["limit_mw"],
        "nvmlDeviceGetPowerUsage": lambda h: min(gpu(h)["draw_mw"], gpu(h)["limit_mw"]),
        "nvmlDeviceGetTotalEnergyConsumption": no_counter,
        "nvmlDeviceGetName": lambda h: "mocked NVML GPU",
        "nvmlSystemGetDriverVersion": lambda: "mock",
    }
    for name, fn in funcs.items():
        setattr(pynvml, name, fn)


def main(argv: list[str]) -> None:
    state, mode, target, *rest = argv
    install(Path(state))
    if mode == "-m":
        sys.argv = [target, *rest]
        runpy.run_module(target, run_name="__main__", alter_sys=True)
    elif mode == "-c":
        sys.argv = ["-c", *rest]
        exec(compile(target, "<fake_nvml -c>", "exec"), {"__name__": "__main__"})
    else:
        sys.exit("usage: python -m tests.unit.fake_nvml STATE.json (-m MODULE | -c CODE) [ARGS...]")


if __name__ == "__main__":
    main(sys.argv[1:])
