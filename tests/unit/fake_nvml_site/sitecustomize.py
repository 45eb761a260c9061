"""Put on PYTHONPATH with FAKE_NVML_STATE=STATE.json set: every Python process started with them
(a script's, and every process it starts in turn) sees the mocked pynvml of tests/unit/fake_nvml.py,
whose GPUs live in that file. The GPU check's rehearsal runs scripts/gpu-check.sh so: nothing in
the check knows it is mocked."""

import os

if os.environ.get("FAKE_NVML_STATE"):
    import importlib.util
    from pathlib import Path

    _spec = importlib.util.spec_from_file_location(
        "_fake_nvml", Path(__file__).resolve().parent.parent / "fake_nvml.py")
    _mod = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_mod)
    _mod.install(Path(os.environ["FAKE_NVML_STATE"]))
