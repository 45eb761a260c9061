"""Interrupts and crashes leak nothing: ``testbed run`` of a netns scenario with real agents, hit by
Ctrl-C (SIGINT to its process group, as a terminal sends it) once, twice and three times at seeded
random moments of start-up, run and teardown, by SIGTERM twice, and by SIGKILL followed by
``testbed clean --run ID``. After each, nothing of the run is left: namespaces, interfaces,
processes, cgroups, state files, temp folders, partial results.

Moments are found by watching the run's state file (each test has its own TESTBED_STATE_DIR):
start-up = the file exists (partial results listed); fabric = namespaces are listed (being made);
run = an agent's throttle cgroup is listed (the controller is stepping); teardown = agent PIDs
leave the list.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.conftest import small_scenario_dict

pytestmark = pytest.mark.root
pytest.importorskip("torch", reason="training agents need torch (scripts/setup.sh installs it)")
TB = [sys.executable, "-m", "testbed"]
SEED = 20261201
EXIT_TIMEOUT_S = 60.0


def _scenario(tmp: Path) -> Path:
    """One policy, one job that migrates a -> b at 1 h, over a link with latency (a delay relay),
    real agents: a few seconds of start-up, run and teardown."""
    d = small_scenario_dict(duration_h=3)
    d["emulation"] = {"time_scale": 100, "byte_scale": 0.001, "nodes": "agents", "steps_per_s": 20}
    d["links"][0].update(bandwidth_gbps=1, latency_ms=20.0)
    d["traces"] = {"renewable": {"a": {"kind": "curtailment_windows", "capacity_kw": 0.1, "windows_per_day": 0.001},
                                 "b": {"kind": "csv", "file": str(tmp / "b.csv")}},
                   "bandwidth": {"events": []}}
    (tmp / "b.csv").write_text("timestamp,value\n0,0\n3600,2.0\n7200,0\n10800,0\n")
    d["workloads"] = {"jobs": [{"id": "j1", "checkpoint_gb": 10, "work_gpu_h": 2.5, "origin": "a"}]}
    d["policies"] = ["energy_only"]
    d["power"] = {"grid_limit_kw": 0.6}  # caps at a: the agent's job gets a throttle cgroup
    f = tmp / "s.yaml"
    f.write_text(yaml.safe_dump(d))
    return f


class Watch:
    """What the run's state files said so far."""

    def __init__(self, state_dir: Path):
        self.dir = state_dir
        self.run_ids: set[str] = set()  # every state file: the run's, and the doctor's (netem probe)
        self.purpose: dict[str, str] = {}
        self.max_pids = 0
        self.pids = 0
        self.cgroups = 0
        self.namespaces = 0
        self.seen = False

    def poll(self) -> None:
        try:
            names = os.listdir(self.dir)
        except FileNotFoundError:
            return
        files = [n for n in names if n.endswith(".json") and not n.startswith(".")]
        self.run_ids |= {n[:-5] for n in files}
        pids = cg = ns = 0
        for n in files:
            try:
                d = json.loads((self.dir / n).read_text())
            except (OSError, ValueError):
                continue
            self.seen = True
            self.purpose[n[:-5]] = d.get("purpose")
            pids += len(d.get("pids", []))
            cg += len([c for c in d.get("cgroups", []) if c.count("-") >= 2])  # tb-<run>-<site>-<job>: throttles
            ns += len(d.get("namespaces", []))
        self.pids = pids
        self.max_pids = max(self.max_pids, pids)
        self.cgroups = max(self.cgroups, cg)
        self.namespaces = max(self.namespaces, ns)

    def reached(self, moment: str) -> bool:
        if moment == "now":
            return True
        if moment == "startup":
            return self.seen
        if moment == "fabric":
            return self.namespaces >= 1
        if moment == "run":
            return self.cgroups >= 1
        if moment == "teardown":
            return self.max_pids >= 3 and self.pids < self.max_pids
        raise ValueError(moment)


@dataclass(frozen=True)
class Hit:
    moment: str  # startup | fabric | run | teardown | now (right after the previous hit)
    sig: int
    delay_s: float
    group: bool = True  # to the process group (a terminal's Ctrl-C) or to the PID (kill)


def _hits(case: str) -> list[Hit]:
    """Seeded random delays: the same moments on every run of the suite."""
    rng = random.Random(f"{SEED}:{case}")
    kind, n, moment = case.split("-")
    sig = {"int": signal.SIGINT, "term": signal.SIGTERM, "kill": signal.SIGKILL}[kind]
    first = {"startup": rng.uniform(0.0, 1.5), "fabric": rng.uniform(0.0, 0.15), "run": rng.uniform(0.0, 2.0),
             "teardown": rng.uniform(0.0, 0.05)}
    hits = [Hit(moment, sig, first[moment], group=(kind == "int"))]
    hits += [Hit("now", sig, rng.uniform(0.02, 0.6), group=(kind == "int")) for _ in range(int(n) - 1)]
    return hits


def _drive(proc: subprocess.Popen, watch: Watch, hits: list[Hit]) -> list[Hit]:
    """Send each hit at its moment; returns those sent while the process was still running."""
    sent = []
    deadline = time.monotonic() + EXIT_TIMEOUT_S
    for hit in hits:
        while proc.poll() is None and not watch.reached(hit.moment):
            if time.monotonic() > deadline:
                raise AssertionError(f"moment {hit.moment} never came")
            watch.poll()
            time.sleep(0.005)
        end = time.monotonic() + hit.delay_s
        while time.monotonic() < end:
            watch.poll()
            time.sleep(0.005)
        if proc.poll() is not None:
            break
        (os.killpg if hit.group else os.kill)(proc.pid, hit.sig)
        sent.append(hit)
    while proc.poll() is None and time.monotonic() < deadline:
        watch.poll()
        time.sleep(0.01)
    if proc.poll() is None:
        proc.kill()
        raise AssertionError(f"testbed did not exit within {EXIT_TIMEOUT_S} s of {hits}")
    watch.poll()
    return sent


def leftovers(run_id: str, state_dir: Path, out_parent: Path) -> list[str]:
    """Everything of run ``run_id`` still there (by its id), plus any state file or partial results."""
    import psutil
    from pyroute2 import IPRoute, netns

    from testbed.power.throttle.cgroups import all_hierarchies

    left = [f"netns {n}" for n in netns.listnetns() if run_id in n]
    with IPRoute() as ipr:
        left += [f"link {lk.get_attr('IFLA_IFNAME')}" for lk in ipr.get_links()
                 if run_id in (lk.get_attr("IFLA_IFNAME") or "")]
    for p in psutil.process_iter(["cmdline", "status"]):
        if p.info["status"] != psutil.STATUS_ZOMBIE and run_id in " ".join(p.info["cmdline"] or []):
            left.append(f"process {p.pid}: {' '.join(p.info['cmdline'])[:120]}")
    for _, mount in all_hierarchies():
        for dirpath, dirnames, _ in os.walk(mount):
            left += [f"cgroup {dirpath}/{d}" for d in dirnames if d.startswith(f"tb-{run_id}")]
            if len(Path(dirpath).parts) - len(mount.parts) >= 4:
                dirnames[:] = []
    if state_dir.exists():
        left += [f"state {n}" for n in os.listdir(state_dir)]
    left += [f"tmp {n}" for n in os.listdir(tempfile.gettempdir()) if n.startswith(f"tb-{run_id}")]
    left += [f"partial {n}" for n in os.listdir(out_parent) if n.startswith(".")]
    return left


def _start(tmp_path: Path, env: dict, runtime: str = "process") -> subprocess.Popen:
    out = tmp_path / "out" / "r"
    out.parent.mkdir()
    scenario = _scenario(tmp_path)
    if runtime != "process":
        d = yaml.safe_load(scenario.read_text())
        d["emulation"]["runtime"] = runtime
        scenario.write_text(yaml.safe_dump(d))
    with open(tmp_path / "stderr.txt", "wb") as err:
        return subprocess.Popen([*TB, "run", str(scenario), "--substrate", "netns", "--out", str(out),
                                 "--no-progress"], env=env, stdout=subprocess.DEVNULL, stderr=err,
                                start_new_session=True)  # its own process group, like a shell job


@pytest.fixture
def env(tmp_path):
    state_dir = tmp_path / "state"
    return {**os.environ, "TESTBED_STATE_DIR": str(state_dir)}, state_dir


CASES = ["int-1-startup", "int-2-startup", "int-3-startup", "int-2-fabric", "int-1-run", "int-2-run", "int-3-run",
         "int-2-teardown", "int-3-teardown", "term-2-startup", "term-2-run"]


@pytest.mark.parametrize("case", CASES)
def test_interrupts_leak_nothing(tmp_path, env, case):
    env, state_dir = env
    watch = Watch(state_dir)
    proc = _start(tmp_path, env)
    sent = _drive(proc, watch, _hits(case))
    err = (tmp_path / "stderr.txt").read_text(errors="replace")
    assert watch.run_ids, f"the run never wrote its state file: {err[-2000:]}"
    assert "Traceback" not in err, err[-3000:]
    if sent:  # honoured, never swallowed: the run ends as interrupted / terminated
        want = 130 if sent[0].sig == signal.SIGINT else 128 + signal.SIGTERM
        assert proc.returncode == want, (proc.returncode, sent, err[-2000:])
    else:
        assert case.endswith("teardown") and proc.returncode == 0, (proc.returncode, err[-2000:])
    for run_id in watch.run_ids:
        assert leftovers(run_id, state_dir, tmp_path / "out") == [], (case, sent, err[-2000:])


def _docker_available() -> bool:
    import shutil

    return shutil.which("dockerd") is not None and shutil.which("debootstrap") is not None


@pytest.mark.parametrize(("case", "runtime"), [
    ("kill-1-startup", "process"), ("kill-1-fabric", "process"), ("kill-1-run", "process"),
    pytest.param("kill-1-run", "docker", marks=pytest.mark.docker),
])
def test_sigkill_then_clean_leaks_nothing(tmp_path, env, case, runtime):
    """The docker case: a private engine (its daemon, containerd, shims, containers, run directory)."""
    if runtime == "docker" and not _docker_available():
        pytest.skip("docker runtime needs Debian's docker.io and debootstrap (scripts/setup.sh installs them)")
    env, state_dir = env
    watch = Watch(state_dir)
    proc = _start(tmp_path, env, runtime)
    sent = _drive(proc, watch, _hits(case))
    assert sent and proc.returncode == -signal.SIGKILL
    runs = [r for r, p in watch.purpose.items() if p == "run"]
    done = {}
    for run_id in sorted(watch.run_ids):  # the run's, and a doctor probe's if the kill cut it short
        done[run_id] = subprocess.run([*TB, "clean", "--run", run_id], env=env, capture_output=True, text=True,
                                      timeout=60)
    assert len(runs) == 1, watch.purpose
    for run_id, d in done.items():
        assert d.returncode == 0 and "Traceback" not in d.stderr, (d.stdout, d.stderr)
        if run_id in runs:
            assert f"{run_id}: removed" in d.stdout, d.stdout
    for run_id in watch.run_ids:
        assert leftovers(run_id, state_dir, tmp_path / "out") == [], (case, done)
        assert not (Path(os.environ.get("TESTBED_DOCKER_DIR", "/var/lib/testbed")) / f"docker-{run_id}").exists()
