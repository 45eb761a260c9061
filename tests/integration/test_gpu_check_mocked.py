"""The GPU check's scenario and SIGINT steps through the real CLI, with NVML mocked (a GPU kept in a
JSON file, tests/unit/fake_nvml.py): power.backend nvml on netns agents. No real GPU is involved."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from testbed.power.gpu import gpu_check
from tests.unit.fake_nvml import read_limit_mw, write_state

pytestmark = pytest.mark.root
ROOT = Path(__file__).resolve().parents[2]
PROFILE = {"name": "mock-gpu", "min_w": 100.0, "max_w": 400.0, "default_w": 400.0, "idle_w": 30.0,
           "points": [[100.0, 0.5, 95.0], [250.0, 0.85, 230.0], [400.0, 1.0, 330.0]]}


@pytest.fixture
def mocked(tmp_path, monkeypatch):
    pytest.importorskip("pynvml", reason="nvidia-ml-py is not installed")
    pytest.importorskip("torch", reason="the node agent trains with torch")
    monkeypatch.chdir(ROOT)
    state = tmp_path / "gpu.json"
    write_state(state, limit_mw=300_000, min_mw=100_000, max_mw=400_000)
    monkeypatch.setattr(gpu_check, "LAUNCHER",
                        [sys.executable, "-m", "tests.unit.fake_nvml", str(state), "-m", "testbed"])
    return state


def test_scenario_caps_follow_the_trace_and_the_limit_comes_back(tmp_path, mocked):
    prof = tmp_path / "profile.yaml"
    prof.write_text(yaml.safe_dump(PROFILE))
    gpu_check.write_trace(tmp_path / "renewable.csv", PROFILE)
    scen = tmp_path / "scenario.yaml"
    scen.write_text(yaml.safe_dump(gpu_check.scenario_yaml(prof, PROFILE, tmp_path / "renewable.csv")))
    res = gpu_check.step_scenario(tmp_path, scen, read_limit_mw=lambda: read_limit_mw(mocked), original_mw=300_000,
                                  tolerance_w=1.0)
    assert res["ok"], (res, gpu_check._tail(tmp_path / "scenario.log", 30))
    assert len(res["caps_w"]) >= 3 and res["power_basis"] == ["measured"]
    sets = yaml.safe_load(mocked.read_text())["gpus"][0]["sets"]
    assert len(set(sets)) >= 3 and sets[-1] == 300_000  # the trace moved the cap; the exit put it back


def test_sigint_during_calibrate_restores_the_limit(tmp_path, mocked):
    cmd = gpu_check._testbed("calibrate", "power", "--caps", "4", "--seconds", "60", "--warmup-s", "0",
                             "--idle-s", "0", "--device", "cpu", "--family", "mlp-digits",
                             "--out", str(tmp_path / "p.yaml"))
    res = gpu_check.sigint_restores(cmd, read_limit_mw=lambda: read_limit_mw(mocked), original_mw=300_000,
                                    changed_within_s=120, exit_within_s=60, log=tmp_path / "sigint.log")
    assert res["ok"], (res, gpu_check._tail(tmp_path / "sigint.log", 30))
    assert res["capped_mw"] != 300_000 and not (tmp_path / "p.yaml").exists()
