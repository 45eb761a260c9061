"""``testbed sweep --ray local``: the 2 x 2 x 3-seed sweep gives byte-identical tables through Ray.

Starts a private Ray instance (2 CPUs) and checks that it is shut down with no Ray process left.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from testbed.cli import main
from testbed.sweep.ray_backend import RayUnavailable, import_ray
from tests.unit.sweep_support import write_sweep

try:
    ray = import_ray()
except RayUnavailable:  # pragma: no cover - ray is in the 'sweep' extra that setup.sh installs
    pytest.skip("ray is not installed (pip install -e '.[sweep]')", allow_module_level=True)

_RAY_MARKS = ("raylet", "gcs_server", "ray::", "default_worker.py", "ray/_private", "ray/dashboard")


def _ray_processes() -> set[int]:
    pids = set()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if any(m in cmd for m in _RAY_MARKS):
            pids.add(int(d.name))
    return pids


def _ours(pids: set[int], since: float) -> set[int]:
    """Of new Ray processes, those this test's instance made: still below this process, or orphaned
    (a Ray process left after its driver shut down is re-parented) after the test began. Another
    Ray instance on the machine (a parallel test worker, another user) is not this test's leak."""
    import psutil

    me, out = os.getpid(), set()
    for pid in pids:
        try:
            p = psutil.Process(pid)
            if p.status() == psutil.STATUS_ZOMBIE:
                continue
            parents = [q.pid for q in p.parents()]
            if me in parents or (p.ppid() == 1 and p.create_time() >= since):
                out.add(pid)
        except psutil.NoSuchProcess:
            continue
    return out


@pytest.mark.slow  # about 80 s on 2 busy cores: 24 trial runs (12 local, 12 through Ray) plus a Ray start
def test_same_table_locally_and_through_ray(tmp_path, capsys):
    path = write_sweep(tmp_path)
    before, since = _ray_processes(), time.time()
    local, through_ray = tmp_path / "local", tmp_path / "ray"
    assert main(["sweep", str(path), "--out", str(local), "--parallel", "2"]) == 0
    assert main(["sweep", str(path), "--out", str(through_ray), "--ray", "local", "--parallel", "2"]) == 0
    assert "12 trials: 0 reused, 12 run, 0 failed (ray:local, parallel 2" in capsys.readouterr().out
    for name in ("results.parquet", "results.csv", "table.csv", "table.md"):
        assert (through_ray / name).read_bytes() == (local / name).read_bytes(), name
    rec = json.loads(next(through_ray.glob("trials/*/seed-0/trial.json")).read_text())
    assert rec["backend"] == "ray:local" and rec["status"] == "completed"
    trial = Path(next(through_ray.glob("trials/*/seed-0/trial.json"))).parent
    assert (trial / "manifest.json").is_file() and (trial / "static" / "summary.json").is_file()
    assert not ray.is_initialized()
    deadline = time.monotonic() + 60  # Ray's processes take a while to exit on 2 busy cores
    while (left := _ours(_ray_processes() - before - {os.getpid()}, since)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not left, f"Ray processes left behind: {sorted(left)}"


class _FlakyRay:
    """Stands in for the ray module: ``init`` fails the first ``failures`` times."""

    def __init__(self, failures: int):
        self.failures, self.inits, self.shutdowns = failures, 0, 0

    def init(self, **kw):
        self.inits += 1
        if self.inits <= self.failures:
            raise RuntimeError("Failed to start GCS.  Last 0 lines of error files:\n")

    def shutdown(self):
        self.shutdowns += 1


def test_local_start_retries_once_after_a_clean_shutdown(monkeypatch, capsys):
    from testbed.sweep import ray_backend

    monkeypatch.delenv("RAY_gcs_server_port_wait_time_s", raising=False)
    ray = _FlakyRay(failures=1)
    ray_backend._start_local(ray, 2, {})
    assert (ray.inits, ray.shutdowns) == (2, 1)
    assert "trying once more" in capsys.readouterr().err
    import os

    assert os.environ["RAY_gcs_server_port_wait_time_s"] == str(ray_backend.LOCAL_GCS_WAIT_S)


def test_local_start_gives_up_after_its_tries(monkeypatch):
    import pytest

    from testbed.sweep import ray_backend

    monkeypatch.setenv("RAY_gcs_server_port_wait_time_s", "7")  # a user's own setting is kept
    ray = _FlakyRay(failures=5)
    with pytest.raises(RuntimeError, match="GCS"):
        ray_backend._start_local(ray, 2, {})
    assert ray.inits == ray.shutdowns == ray_backend.LOCAL_START_TRIES
    import os

    assert os.environ["RAY_gcs_server_port_wait_time_s"] == "7"
