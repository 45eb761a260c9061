"""The GPU check rehearsed on the machine it will meet (issue #35), without a GPU.

An offline GPU machine (bare): Python 3.12 with CUDA torch, nvidia-ml-py, numpy, pandas,
pyarrow, psutil, PyYAML, scikit-learn, matplotlib, tqdm, pytest, and none of testbed's other
dependencies. Here: that image rebuilt as a Python 3.12 virtual environment
(scripts/gpu-rehearsal-env.sh, built once by scripts/setup.sh, ~2 min and ~5 GB the first time; the
package index's torch is the CUDA build, which runs on the CPU), the bundle of what it lacks
(scripts/gpu-bundle.sh), and scripts/gpu-check.sh run in a network namespace of its own with only
the loopback up (nothing outside can be reached) and NVML mocked to find no GPU (every Python
process of the check sees tests/unit/fake_nvml.py through tests/unit/fake_nvml_site/sitecustomize.py).
The check must install the bundle, import everything, reach every GPU step and end with "no GPU" as
its only failure, within its time budget, writing at most 8 small files.

Then the same with a mocked GPU and the calibrations on the CPU: every step passes but the doctor's
(no CUDA here).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from testbed.power.gpu import gpu_check
from tests.unit.fake_nvml import read_limit_mw, write_no_gpu, write_state

pytestmark = [pytest.mark.root, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
MAX_FILES, MAX_FILE_BYTES, MAX_BUNDLE_MIB = 8, 1 << 20, 30


@pytest.fixture(scope="module")
def image_python() -> Path:
    """The stand-in of the GPU machine's image (built once; scripts/setup.sh builds it in CI)."""
    done = subprocess.run(["bash", str(ROOT / "scripts" / "gpu-rehearsal-env.sh")], capture_output=True, text=True,
                          timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    py = Path(done.stdout.strip().splitlines()[-1])
    assert py.is_file(), done.stdout
    return py


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bundle") / "gpu-bundle"
    done = subprocess.run(["bash", str(ROOT / "scripts" / "gpu-bundle.sh"), str(out)], capture_output=True,
                          text=True, timeout=300, check=False, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == f"bash scripts/gpu-check.sh --bundle {out}"
    return out


def test_the_bundle_is_small_and_made_for_cpython_312(bundle):
    wheels = sorted(p.name for p in bundle.glob("*.whl"))
    size = sum(p.stat().st_size for p in bundle.iterdir())
    assert size < MAX_BUNDLE_MIB << 20, size
    names = {w.split("-")[0].lower() for w in wheels}
    assert {"pydantic", "pydantic_core", "pyroute2", "typing_extensions"} <= names, wheels
    assert not names & {"numpy", "pandas", "torch", "scipy", "pyarrow"}, wheels  # the image has those
    for w in wheels:  # pure Python, or CPython 3.12 on manylinux x86-64
        tags = w[:-4].split("-")[-3:]
        assert tags[1] == "none" or tags[0] == "cp312", w
        assert tags[2] == "any" or "manylinux" in tags[2] and tags[2].endswith("x86_64"), w


def _rehearse(image_python: Path, bundle: Path, tmp_path: Path, nvml_state: Path, **env_add: str):
    """scripts/gpu-check.sh --bundle in the image's stand-in, cut off the network (its own network
    namespace, only the loopback up), every Python process of it seeing the mocked NVML."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        pytest.fail("unshare and ip (util-linux, iproute2) are needed to cut the check off the network")
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON", "VIRTUAL_ENV"))}
    env.update(PYTHON=str(image_python), FAKE_NVML_STATE=str(nvml_state), PIP_CONFIG_FILE=os.devnull,
               PYTHONPATH=str(ROOT / "tests" / "unit" / "fake_nvml_site"),
               PATH=":".join(p for p in env.get("PATH", "").split(":") if ".venv" not in p), **env_add)
    t0 = time.monotonic()
    done = subprocess.run(
        ["unshare", "--net", "--", "sh", "-c", 'ip link set lo up && exec bash scripts/gpu-check.sh --bundle "$0" "$1"',
         str(bundle), str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=gpu_check.TOTAL_BUDGET_S + 60, check=False)
    wall = time.monotonic() - t0
    said = done.stdout[-4000:] + done.stderr[-4000:]
    if (out / "logs.txt").is_file():
        said += "\n" + (out / "logs.txt").read_text()[-6000:]
    assert wall < gpu_check.TOTAL_BUDGET_S, (wall, said)
    files = sorted(out.iterdir())
    assert len(files) <= MAX_FILES and all(f.is_file() and f.stat().st_size < MAX_FILE_BYTES for f in files), files
    environment = (out / "environment.txt").read_text()
    assert environment.startswith("python: 3.12.") and "bundle: " in environment, environment
    logs = (out / "logs.txt").read_text() + environment
    for offline in ("Network is unreachable", "Temporary failure in name resolution", "Retrying", "ModuleNotFoundError"):
        assert offline not in logs, offline
    res = json.loads((out / "gpu-check.json").read_text())
    assert res["python"].startswith("3.12."), res
    steps = res["steps"]
    assert list(steps) == ["doctor", "calibrate", "scenario", "sigint", "netns"]
    assert all(s["wall_s"] <= s["budget_s"] for s in steps.values()), steps
    return done.returncode, res, out, said


def test_rehearsal_bare_offline_python312_no_gpu(image_python, bundle, tmp_path):
    bare = subprocess.run([str(image_python), "-c", "import pydantic"], capture_output=True, check=False)
    assert bare.returncode != 0, "the image's stand-in has pydantic: it would not show a missing bundle entry"
    state = tmp_path / "nvml.json"
    write_no_gpu(state)
    rc, res, out, said = _rehearse(image_python, bundle, tmp_path, state)
    assert rc == 3 and res["verdict"] == "no GPU", said  # 3: the only failures are "no GPU"
    steps = res["steps"]
    for name in ("doctor", "calibrate", "scenario", "sigint", "netns"):  # every GPU step reached, and says why it failed
        assert steps[name]["verdict"] == "no GPU", (name, steps[name], said)
    assert "local" in steps["scenario"]["detail"] and "NVML" in steps["scenario"]["detail"], steps["scenario"]
    assert "| calibrate | no GPU |" in (out / "gpu-check.md").read_text()


def test_rehearsal_with_a_mocked_gpu_every_step_but_cuda_passes(image_python, bundle, tmp_path):
    """The same, with a mocked GPU (NVML's limits in a file) and the calibrations training on the CPU:
    every step passes but the doctor's (no CUDA here); the limit is back at the end."""
    state = tmp_path / "nvml.json"
    write_state(state, limit_mw=300_000, min_mw=100_000, max_mw=400_000)
    rc, res, out, said = _rehearse(image_python, bundle, tmp_path, state, DEVICE="cpu", FAMILY="mlp-digits",
                                   SECONDS_PER_CAP="3")
    steps = res["steps"]
    assert rc == 1 and steps["doctor"]["verdict"] == "FAIL" and "CUDA not available" in steps["doctor"]["detail"], said
    for name in ("calibrate", "scenario", "sigint", "netns"):
        assert steps[name]["verdict"] == "PASS", (name, steps[name], said)
    assert steps["scenario"]["substrate"] == "local" and len(steps["scenario"]["caps_w"]) >= 3
    assert res["gpu_identity"]["name"] == "mocked NVML GPU" and res["limit_at_end_mw"] == read_limit_mw(state) == 300_000
    prof = yaml.safe_load((out / "profile.yaml").read_text())
    assert len(prof["measured"]["rows"]) >= gpu_check.MIN_CAPS
