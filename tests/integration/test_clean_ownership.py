"""``testbed clean`` removes only what testbed made: look-alike namespaces, interfaces and cgroups
that no state file lists stay; stray and malformed files in the state directory are reported and
left; a state file's paths are removed only if they are testbed's by name and kind; a doctor's
scratch namespaces are skipped while the doctor runs. The test removes its own look-alikes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from testbed.netem.owned import state
from testbed.netem.owned.naming import new_run_id
from testbed.netem.nsmake import create_netns, remove_netns

pytestmark = pytest.mark.root
TB = [sys.executable, "-m", "testbed"]


def _clean(env, *args) -> subprocess.CompletedProcess:
    return subprocess.run([*TB, "clean", *args], env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture
def env(tmp_path, monkeypatch):
    d = tmp_path / "state"
    monkeypatch.setattr(state, "STATE_DIR", d)
    return {**os.environ, "TESTBED_STATE_DIR": str(d)}, d


def _v1_cpu() -> Path | None:
    from testbed.power.throttle.cgroups import cgroup_mounts

    return cgroup_mounts().get("v1_cpu") or cgroup_mounts().get("v2")


def test_look_alikes_that_no_state_file_lists_stay(env):
    from pyroute2 import IPRoute, netns

    env, state_dir = env
    rid = new_run_id()
    ns, veth = f"tb-{rid}-x", f"tb{rid}q"
    cg_root = _v1_cpu()
    cg = cg_root / f"tb-{rid}-look" if cg_root else None
    create_netns(ns)
    try:
        with IPRoute() as ipr:
            ipr.link("add", ifname=veth, kind="veth", peer=f"tb{rid}r")
        if cg:
            cg.mkdir()
        state_dir.mkdir()
        (state_dir / "notes.txt").write_text("secret-contents")
        (state_dir / f"{rid}.json").write_text("{ malformed")
        (state_dir / "zzz999.json").write_text(json.dumps({"run_id": "zzz999", "namespaces": [ns]}))
        for args in ((), ("--run", rid), ("--run", rid, "--force")):
            done = _clean(env, *args)
            assert done.returncode == 0, done.stderr
            assert "Traceback" not in done.stderr and "secret-contents" not in done.stdout + done.stderr
            assert ns in netns.listnetns()
            with IPRoute() as ipr:
                assert ipr.link_lookup(ifname=veth)
            assert cg is None or cg.is_dir()
            assert sorted(os.listdir(state_dir)) == sorted(["notes.txt", f"{rid}.json", "zzz999.json"])
        bare = _clean(env)
        assert "notes.txt: not a testbed state file" in bare.stderr
        assert f"{rid}.json: not a testbed state file (not valid JSON)" in bare.stderr
        assert "zzz999.json: not a testbed state file (no testbed marker" in bare.stderr
        assert "not a valid testbed state file" in _clean(env, "--run", rid).stdout
    finally:
        remove_netns(ns)
        with IPRoute() as ipr:
            for i in ipr.link_lookup(ifname=veth):
                ipr.link("del", index=i)
        if cg and cg.is_dir():
            cg.rmdir()


def test_listed_paths_and_names_must_be_testbeds(env, tmp_path):
    from pyroute2 import netns

    env, state_dir = env
    rid, other = new_run_id(), new_run_id()
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "data").write_text("keep")
    link = Path(tempfile.gettempdir()) / f"tb-{rid}-link"
    link.symlink_to(precious)
    ours = Path(tempfile.gettempdir()) / f"tb-{rid}-agents-test"
    ours.mkdir()
    (ours / "token").write_text("t")
    partial = tmp_path / ".r.partial-1"
    partial.mkdir()
    foreign_ns, our_ns = f"tb-{other}-x", f"tb-{rid}-a"
    create_netns(foreign_ns)
    create_netns(our_ns)
    sleeper = [sys.executable, "-c", "import time; time.sleep(120)"]
    worker = subprocess.Popen([*sleeper, str(ours / "token")])  # works in the run's temp folder: the run's
    bystander = subprocess.Popen([*sleeper, str(link / "data")])  # names the look-alike link: not the run's
    try:
        gone = subprocess.Popen(["true"])  # an owner that has exited
        gone.wait()
        data = state.record(rid, purpose="run")
        data.update(owner_pid=gone.pid, owner_started=None, namespaces=[our_ns, foreign_ns],
                    tmp_dirs=[str(precious), str(link), str(ours), "/etc"], partial_dirs=[str(partial), str(precious)])
        state.write(rid, data)
        done = _clean(env, "--run", rid)
        assert done.returncode == 0, done.stderr
        assert our_ns not in netns.listnetns() and foreign_ns in netns.listnetns()
        assert not ours.exists() and not partial.exists()
        assert worker.wait(timeout=10) is not None and bystander.poll() is None
        assert (precious / "data").read_text() == "keep" and link.is_symlink() and Path("/etc/hostname").exists()
        assert done.stderr.count("left alone") == 5, done.stderr  # foreign ns, precious x2, link, /etc
        assert state.read(rid) is None
    finally:
        for p in (worker, bystander):
            p.kill()
            p.wait()
        link.unlink(missing_ok=True)
        remove_netns(foreign_ns)
        remove_netns(our_ns)


def test_a_running_doctors_scratch_namespace_is_skipped(env):
    from pyroute2 import netns

    from testbed.doctor import scratch

    env, _ = env
    rid = new_run_id()
    with scratch.scratch_netns(rid, "ns") as name:  # this test process is the doctor: alive
        assert state.read(rid)["purpose"] == "doctor"
        done = _clean(env)
        assert done.returncode == 0 and f"{rid}: skipped: owner process {os.getpid()} is alive" in done.stdout
        assert name in netns.listnetns()
    assert name not in netns.listnetns() and state.read(rid) is None
