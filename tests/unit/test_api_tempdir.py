"""testbed.run(..., out=None) leaves no temporary folder behind: its Results owns the directory,
removed when the object is garbage collected, when Python exits, or at once if the run fails."""

from __future__ import annotations

import gc
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import testbed

REPO = Path(__file__).resolve().parents[2]
SMALL = REPO / "scenarios" / "sweep-small.yaml"


def _small() -> dict:
    d = yaml.safe_load(SMALL.read_text())
    d.update(duration_h=12, policies=["feasibility_aware"])
    d["workloads"]["arrivals"]["until_h"] = 10
    return d


def test_the_directory_goes_with_the_results_object():
    res = testbed.run(_small(), plots=False, progress=False)
    path = res.path
    assert path.is_dir() and res.temporary and path.name.startswith("testbed-sweep-small-")
    summary = res.summary  # what was read stays readable
    del res
    gc.collect()
    assert not path.exists()
    assert len(summary) == 1


def test_keep_keeps_it():
    res = testbed.run(_small(), plots=False, progress=False)
    path = res.keep()
    assert not res.temporary
    del res
    gc.collect()
    try:
        assert (path / "manifest.json").is_file()
    finally:
        shutil.rmtree(path)


def test_a_run_that_fails_removes_its_temporary_directory(monkeypatch):
    import testbed.api as api

    seen = []

    def failing(prepared, *, out, **kw):
        seen.append(out)
        (out / "half-written").write_text("x")
        raise RuntimeError("the run broke")

    monkeypatch.setattr(api, "run_prepared", failing)
    with pytest.raises(RuntimeError, match="the run broke"):
        testbed.run(_small(), plots=False, progress=False)
    [out] = seen
    assert out.name.startswith("testbed-sweep-small-") and not out.exists()


def test_nothing_is_left_when_python_exits_holding_the_results(tmp_path):
    code = ("import sys, yaml, testbed\n"
            f"d = yaml.safe_load(open({str(SMALL)!r}))\n"
            "d.update(duration_h=12, policies=['feasibility_aware']); d['workloads']['arrivals']['until_h'] = 10\n"
            "res = testbed.run(d, plots=False, progress=False)\n"
            "print(res.path)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    path = Path(r.stdout.strip().splitlines()[-1])
    assert path.name.startswith("testbed-sweep-small-") and not path.exists()
