"""A scenario's ``plugins:`` and installed packages' ``testbed.plugins`` entry points: whatever a plug-in
registers (here a trace kind and a power backend, each one file outside the package) is named in a
scenario with no other step. Each CLI call runs in a fresh interpreter, where only what the scenario
or the installed entry points bring is registered."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import yaml

from tests.conftest import small_scenario_dict

REPO = Path(__file__).resolve().parents[3]
FIXTURES = REPO / "tests" / "fixtures"


def _testbed(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "testbed", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env={**os.environ, **(env or {})})


def _scenario(tmp_path: Path, plugins: list | None, name: str = "s.yaml") -> Path:
    d = small_scenario_dict(policies=["static"])
    if plugins is not None:
        d["plugins"] = plugins
    d["traces"]["renewable"]["default"] = {"kind": "constant_kw", "kw": 1.5}
    d["power"] = {"backend": "throwaway-half"}
    path = tmp_path / name
    path.write_text(yaml.safe_dump(d, sort_keys=False), encoding="utf-8")
    return path


def test_a_scenario_names_what_its_plugins_register_and_its_copy_loads_again(tmp_path):
    (tmp_path / "lab").mkdir()
    shutil.copy(FIXTURES / "throwaway_trace.py", tmp_path / "lab" / "const_trace.py")  # a file
    shutil.copy(FIXTURES / "throwaway_power.py", tmp_path / "half_power.py")  # a module beside the scenario
    scenario = _scenario(tmp_path, ["lab/const_trace.py", "half_power"])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    r = _testbed("run", str(scenario), "--substrate", "sim", "--out", str(tmp_path / "out"), "--no-progress",
                 "--no-plots", cwd=elsewhere)
    assert r.returncode == 0, r.stderr[-2000:]
    traces = pd.read_parquet(tmp_path / "out" / "traces.parquet")
    assert set(traces.loc[traces["quantity"] == "renewable_power", "value"]) == {1.5}
    resolved = json.loads((tmp_path / "out" / "manifest.json").read_text())["scenario"]["resolved"]
    assert resolved["plugins"] == [str((tmp_path / "lab" / "const_trace.py").resolve()), "half_power"]
    # the resolved scenario loads again from another folder: the file is absolute, the module is found
    # beside the scenario (or on sys.path)
    copy = elsewhere / "resolved.yaml"
    copy.write_text(yaml.safe_dump(resolved, sort_keys=False), encoding="utf-8")
    third = tmp_path / "third"
    third.mkdir()
    assert _testbed("validate", str(copy), cwd=third).returncode == 2  # half_power is not beside it
    shutil.copy(tmp_path / "half_power.py", elsewhere / "half_power.py")
    r = _testbed("validate", str(copy), cwd=third)
    assert r.returncode == 0, r.stderr[-2000:]


def test_without_the_plugins_the_names_are_unknown_and_bad_entries_are_named(tmp_path):
    r = _testbed("validate", str(_scenario(tmp_path, None)), cwd=tmp_path)
    assert r.returncode == 2 and "unknown kind 'constant_kw'" in r.stderr and "throwaway-half" in r.stderr
    (tmp_path / "broken.py").write_text("SECRET = 1\nraise RuntimeError('the lab module is broken')\n")
    (tmp_path / "notes.txt").write_text("not python")
    bad = _scenario(tmp_path, ["missing/file.py", "no_such_module_xyz", "broken.py", "1bad name", 7], "bad.yaml")
    r = _testbed("validate", str(bad), cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    err = r.stderr
    assert f"{bad}: plugins[0]: file not found: missing/file.py" in err
    assert "plugins[1]: cannot import 'no_such_module_xyz': ModuleNotFoundError" in err
    assert "plugins[2]: cannot import 'broken.py': RuntimeError: the lab module is broken" in err
    assert "plugins[3]: not a module name nor a .py file" in err and "plugins[4]: a module name" in err
    assert "SECRET" not in err


def test_an_installed_package_is_a_plugin_through_its_entry_point(tmp_path):
    site = tmp_path / "site"
    (site / "lab_pkg").mkdir(parents=True)
    shutil.copy(FIXTURES / "throwaway_trace.py", site / "lab_pkg" / "traces.py")
    shutil.copy(FIXTURES / "throwaway_power.py", site / "lab_pkg" / "power.py")
    (site / "lab_pkg" / "__init__.py").write_text("")
    dist = site / "lab_pkg-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: lab-pkg\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[testbed.plugins]\nlab_traces = lab_pkg.traces\nlab_power = lab_pkg.power\n"
                                           "lab_broken = lab_pkg.nothing_here\n")
    env = {"PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}
    r = _testbed("validate", str(_scenario(tmp_path, None)), cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    assert "plug-in 'lab_broken' (entry point lab_pkg.nothing_here, group testbed.plugins) was not loaded" in r.stderr
