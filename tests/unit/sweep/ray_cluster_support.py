"""A real Ray cluster started as a user starts one (``ray start --head``, then ``ray start --address``
for a second node), private to one test: its own temp dir, HOME (so its auth token) and free ports,
never the defaults. Stopping it ends only its processes: each ``ray start`` runs in a new session,
and every daemon it leaves behind (GCS, raylet, agents, workers) keeps that session's process
group, so the group ids of the ``ray start`` processes this helper ran name exactly this cluster's
processes. They get SIGTERM in the order ``ray stop`` uses (raylets, the rest, GCS), then SIGKILL.
``ray stop`` is never used: it stops every Ray cluster of the user on the machine."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil

RAY = str(Path(sys.executable).with_name("ray"))
START_TIMEOUT_S = 240
# how long `ray start` waits for its raylet to register with the GCS (Ray's default: 30 s). On a busy
# 2-core machine (the suite runs beside it) a worker's registration took longer than 30 s, and `ray start`
# gave up although nothing was wrong.
RAYLET_START_WAIT_S = 150


def free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class RayCluster:
    """``with RayCluster() as c: c.start_head(cpus=1); c.add_worker(cpus=1); ... c.address``"""

    def __init__(self, env: dict | None = None):
        # short: Ray puts unix sockets under it (a path of at most 107 bytes)
        self.root = Path(tempfile.mkdtemp(prefix="tbray-", dir="/tmp"))
        self.home = self.root / "home"
        self.home.mkdir()
        self.env = {**os.environ, "HOME": str(self.home), "RAY_USAGE_STATS_ENABLED": "0",
                    "RAY_raylet_start_wait_time_s": str(RAYLET_START_WAIT_S), **(env or {})}
        for name in ("RAY_ADDRESS", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
            self.env.pop(name, None)
        self.address: str | None = None
        self.pgids: list[int] = []
        self.logs: list[Path] = []
        self._blocks: list[range] = []  # each node's worker ports
        self._singles: set[int] = set()  # every other port picked for this cluster

    def __enter__(self) -> "RayCluster":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def generate_token(self) -> str:
        """What a user has after any earlier ``ray.init()``: ~/.ray/auth_token (here, in our HOME)."""
        subprocess.run([RAY, "get-auth-token", "--generate"], env=self.env, check=True, capture_output=True,
                       timeout=60)
        return (self.home / ".ray" / "auth_token").read_text()

    def _single_port(self) -> int:
        """A free port outside every worker block and not picked before (Ray refuses a node whose
        single ports fall in its own worker range)."""
        while True:
            p = free_ports(1)[0]
            if p not in self._singles and not any(p in b for b in self._blocks):
                self._singles.add(p)
                return p

    def _node_ports(self) -> list[str]:
        """Ports for one node: a block of 201 worker ports holding none of the single ports picked so
        far (the head's gcs and dashboard ports included), and six single ports outside every block."""
        while True:
            lo = free_ports(1)[0]
            block = range(lo, lo + 201)
            if lo + 200 <= 65535 and not any(p in block for p in self._singles):
                break
        self._blocks.append(block)
        nm, om, agent, agent_grpc, runtime_env, metrics = (self._single_port() for _ in range(6))
        return ["--node-manager-port", str(nm), "--object-manager-port", str(om),
                "--dashboard-agent-listen-port", str(agent), "--dashboard-agent-grpc-port", str(agent_grpc),
                "--runtime-env-agent-port", str(runtime_env), "--metrics-export-port", str(metrics),
                "--min-worker-port", str(lo), "--max-worker-port", str(lo + 200)]

    def _start(self, name: str, args: list[str], temp_dir: Path, env: dict | None = None) -> None:
        log = self.root / f"{name}.log"
        self.logs.append(log)
        with open(log, "wb") as out:
            p = subprocess.Popen([RAY, "start", *args, "--temp-dir", str(temp_dir), "--disable-usage-stats",
                                  *self._node_ports()], env={**self.env, **(env or {})}, stdout=out, stderr=subprocess.STDOUT,
                                 start_new_session=True)
        self.pgids.append(p.pid)  # the new session's id, shared by every daemon it starts
        try:
            rc = p.wait(timeout=START_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            rc = None
        if rc != 0:
            raise RuntimeError(f"ray start ({name}) failed ({rc}): {log.read_text(errors='replace')[-2000:]}")

    def start_head(self, cpus: int = 1) -> str:
        gcs, dashboard = self._single_port(), self._single_port()
        self._start("head", ["--head", "--port", str(gcs), "--dashboard-port", str(dashboard), "--include-dashboard=false",
                             "--num-cpus", str(cpus)], self.root / "head")
        self.address = f"127.0.0.1:{gcs}"
        return self.address

    def add_worker(self, cpus: int = 1) -> None:
        assert self.address, "start_head first"
        n = len(self.pgids)
        # `ray start --address` turns token auth on only when told to (Ray's docs: RAY_AUTH_MODE=token on
        # every node joining a cluster with a token); the token is the head's (the same HOME here)
        auth = {"RAY_AUTH_MODE": "token"} if (self.home / ".ray" / "auth_token").exists() else {}
        self._start(f"worker{n}", ["--address", self.address, "--num-cpus", str(cpus)], self.root / f"worker{n}", auth)

    def processes(self) -> list[psutil.Process]:
        """Every live process of this cluster: the members of the sessions our ``ray start`` made."""
        ours = set(self.pgids)
        found = []
        for p in psutil.process_iter():
            try:
                if os.getpgid(p.pid) in ours and p.pid != os.getpid():
                    found.append(p)
            except (ProcessLookupError, psutil.Error):
                continue
        return found

    def stop(self, grace_s: float = 10.0) -> None:
        def kind(p: psutil.Process) -> int:
            try:
                name = p.name()
            except psutil.Error:
                return 1
            return 0 if "raylet" in name else 2 if "gcs_server" in name else 1

        for rank in (0, 1, 2):
            group = [p for p in self.processes() if kind(p) == rank]
            for p in group:
                try:
                    p.send_signal(signal.SIGTERM)
                except psutil.Error:
                    pass
            _, alive = psutil.wait_procs(group, timeout=grace_s / 3)
            for p in alive:
                try:
                    p.kill()
                except psutil.Error:
                    pass
            psutil.wait_procs(alive, timeout=5)
        left = self.processes()
        for p in left:  # workers a raylet started while we were stopping it
            try:
                p.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(left, timeout=5)
        shutil.rmtree(self.root, ignore_errors=True)
