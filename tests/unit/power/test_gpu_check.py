"""The GPU check's own logic with NVML mocked (no GPU here): the restore-after-SIGINT check against
a real process that holds a (mocked) GPU cap, the enforced-vs-requested check, the scenario it writes."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from testbed.power.gpu.gpu_check import check_enforced, scenario_yaml, sigint_restores, write_trace
from tests.unit.fake_nvml import read_limit_mw, write_state

pytest.importorskip("pynvml", reason="nvidia-ml-py is not installed")
ROOT = Path(__file__).resolve().parents[3]


def _child(state: Path, code: str) -> list[str]:
    return [sys.executable, "-m", "tests.unit.fake_nvml", str(state), "-c", code]


@pytest.fixture
def state(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)  # the child imports tests.unit.fake_nvml
    f = tmp_path / "gpu.json"
    write_state(f, limit_mw=300_000)
    return f


HOLDS_A_CAP = """
import time
from testbed.power.gpu.nvml import NvmlNode
with NvmlNode([0]) as node:
    node.set_limit_w(200.0)
    time.sleep(120)
"""

FORGETS_THE_CAP = """
import time, pynvml
pynvml.nvmlDeviceSetPowerManagementLimit(0, 200000)
time.sleep(120)
"""


def test_sigint_restores_the_limit_held_by_an_nvml_node(state):
    res = sigint_restores(_child(state, HOLDS_A_CAP), read_limit_mw=lambda: read_limit_mw(state),
                          original_mw=300_000, changed_within_s=60, exit_within_s=30, poll_s=0.05)
    assert res["ok"], res
    assert res["capped_mw"] == 200_000 and res["limit_after_mw"] == 300_000 and "restored" in res["detail"]


def test_sigint_check_fails_when_the_cap_is_left_behind(state):
    res = sigint_restores(_child(state, FORGETS_THE_CAP), read_limit_mw=lambda: read_limit_mw(state),
                          original_mw=300_000, changed_within_s=60, exit_within_s=30, poll_s=0.05)
    assert not res["ok"] and res["limit_after_mw"] == 200_000 and "NOT restored" in res["detail"]


def test_sigint_check_fails_when_nothing_was_capped(state):
    res = sigint_restores(_child(state, "import time; time.sleep(0.5)"), read_limit_mw=lambda: read_limit_mw(state),
                          original_mw=300_000, changed_within_s=5, exit_within_s=5, poll_s=0.05)
    assert not res["ok"] and "never changed" in res["detail"]


def test_enforced_must_match_requested(tmp_path):
    rows = {"cap_w": [200.0, 300.0, 250.0], "cap_enforced_w": [200.0, 300.4, 250.0], "backend": ["nvml"] * 3,
            "gpu_power_w": [180.0, 260.0, 240.0], "gpu_power_basis": ["measured"] * 3}
    pd.DataFrame(rows).to_parquet(tmp_path / "ok.parquet")
    ok = check_enforced(tmp_path / "ok.parquet", 1.0)
    assert ok["ok"] and ok["rows"] == 3 and ok["max_abs_diff_w"] == pytest.approx(0.4)
    rows["cap_enforced_w"][1] = 320.0  # the driver kept another limit
    pd.DataFrame(rows).to_parquet(tmp_path / "bad.parquet")
    bad = check_enforced(tmp_path / "bad.parquet", 1.0)
    assert not bad["ok"] and "1 rows off" in bad["detail"]


def test_the_check_scenario_loads_and_sweeps_the_profile(tmp_path):
    from testbed.power import builtin  # noqa: F401  (registers power.backend names, as the CLI does)
    from testbed.power.gpu.profile import load_profile
    from testbed.spec import load_scenario

    prof = {"name": "gpu0-gpu-check", "min_w": 200.0, "max_w": 700.0, "default_w": 700.0, "idle_w": 60.0,
            "points": [[200.0, 0.55, 195.0], [350.0, 0.8, 340.0], [500.0, 0.95, 480.0], [700.0, 1.0, 610.0]]}
    pf = tmp_path / "profile.yaml"
    pf.write_text(yaml.safe_dump(prof))
    load_profile(pf)
    values = write_trace(tmp_path / "r.csv", prof)
    assert min(values) < 0.1 + 0.195 + 0.1 and max(values) == pytest.approx(0.1 + 0.61)
    scen = tmp_path / "s.yaml"
    scen.write_text(yaml.safe_dump(scenario_yaml(pf, prof, tmp_path / "r.csv")))
    sc = load_scenario(scen).scenario
    assert sc.power.backend == "nvml" and sc.emulation.nodes == "agents" and len(sc.sites) == 1
