"""Node agents as processes in their site namespaces (the ``process`` runtime), driven from the
controller namespace over the management network only."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from testbed.agent.client import AgentClient
from testbed.netem import state
from testbed.netem.fabric import Fabric, FabricError
from testbed.netem.nsexec import socket_factory, spawn, terminate

CONTROL_PORT = 7100
TRANSFER_PORT = 7000
READY_TIMEOUT_S = 120.0
DOCKER_DATA_ROOT = Path("/var/lib/testbed/docker-data")  # image cache kept between runs (locked while in use)


def _nvidia_gpus() -> bool:
    """Real NVIDIA GPUs here (NVML answers)? Then agent containers get them by Docker device request."""
    try:
        import pynvml
    except ImportError:
        return False
    try:
        pynvml.nvmlInit()
        try:
            return pynvml.nvmlDeviceGetCount() > 0
        finally:
            pynvml.nvmlShutdown()
    except pynvml.NVMLError:
        return False


def agent_job_id(job_id: str) -> str:
    """Job ids as the control protocol accepts them ([A-Za-z0-9._-], 64 characters)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", job_id)[:64] or "job"


class AgentPool:
    """``runtime``: ``process`` (an agent process in each site namespace) or ``docker`` (an agent
    in a container per site whose processes live in the site's namespace, the Containernet way;
    a private Docker engine is started for the run and stopped after it)."""

    def __init__(self, fabric: Fabric, token: str, *, runtime: str = "process"):
        if runtime not in ("process", "docker"):
            raise ValueError(f"unknown runtime {runtime!r}")
        self.fabric = fabric
        self.runtime = runtime
        self._token = token
        self._engine = None
        self._containers: dict = {}
        self._dir = Path(tempfile.mkdtemp(prefix=f"tb-{fabric.plan.run_id}-agents-"))
        self._procs: dict[str, subprocess.Popen] = {}
        self._clients: dict[str, AgentClient] = {}

    def start(self) -> None:
        token_file = self._dir / "token"
        token_file.write_text(self._token)
        os.chmod(token_file, 0o600)
        plan = self.fabric.plan
        for s in plan.sites:
            work = self._dir / s.name
            work.mkdir()
            argv = [sys.executable, "-m", "testbed.agent", "--site", s.name, "--mgmt-addr", s.mgmt_addr,
                    "--port", str(CONTROL_PORT), "--wan-addr", s.addr, "--transfer-port", str(TRANSFER_PORT),
                    "--token-file", str(token_file), "--workdir", str(work), "--ready-file", str(work / "ready"),
                    "--run-id", plan.run_id]
            if self.runtime == "docker":
                self._start_container(s.name, argv)
                continue
            log = open(work / "agent.log", "wb")  # noqa: SIM115 (the child keeps it)
            try:
                self._procs[s.name] = spawn(self.fabric.site_ns(s.name), argv, stdin=subprocess.DEVNULL,
                                            stdout=log, stderr=subprocess.STDOUT)
            finally:
                log.close()
        st = state.read(plan.run_id) or {}
        st["pids"] = sorted(set(st.get("pids", [])) | {p.pid for p in self._procs.values()})
        state.write(plan.run_id, st)
        deadline = time.monotonic() + READY_TIMEOUT_S
        for s in plan.sites:
            while not (self._dir / s.name / "ready").exists():
                if s.name in self._procs and self._procs[s.name].poll() is not None:
                    log = (self._dir / s.name / "agent.log").read_text(errors="replace")[-2000:]
                    raise FabricError(f"agent at {s.name} exited with {self._procs[s.name].returncode}: {log}")
                if time.monotonic() > deadline:
                    raise FabricError(f"agent at {s.name} not ready after {READY_TIMEOUT_S} s")
                time.sleep(0.05)
            self._clients[s.name] = AgentClient(s.mgmt_addr, CONTROL_PORT, self._token, socket_factory=socket_factory(self.fabric._ns(self.fabric.plan.ctl_ns)))

    def _start_container(self, site: str, argv: list[str]) -> None:
        from testbed.runtime import ContainerNode, DockerEngine, ensure_base_image
        from testbed.runtime.container import Mount

        if self._engine is None:
            self._engine = DockerEngine(self.fabric.plan.run_id, data_root=DOCKER_DATA_ROOT)
            self._engine.__enter__()
            self._image = ensure_base_image(self._engine)
            st = state.read(self.fabric.plan.run_id) or {}
            st["docker"] = {"engine_pid": self._engine.pid, "run_dir": str(getattr(self._engine, "run_dir", ""))}
            st["pids"] = sorted(set(st.get("pids", [])) | {self._engine.pid})  # testbed clean ends it by PID
            state.write(self.fabric.plan.run_id, st)
        node = ContainerNode(self._engine, site, self.fabric.site_ns(site), argv, image=self._image.tag,
                             mounts=[Mount(str(self._dir), str(self._dir), read_only=False)], host_python=True,
                             gpus="all" if _nvidia_gpus() else None)
        node.__enter__()
        self._containers[site] = node

    def client(self, site: str) -> AgentClient:
        return self._clients[site]

    def kill(self, site: str) -> None:
        """End one site's agent (fault injection: a destination dies mid-transfer): by PID for
        processes, ``docker kill`` of its own container for containers."""
        if site in self._containers:
            self._engine.run("kill", self._containers[site].id)
            return
        proc = self._procs[site]
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)

    def stop(self) -> None:
        for c in self._clients.values():
            c.close()
        self._clients.clear()
        terminate(self._procs.values(), timeout_s=10)
        self._procs.clear()
        for node in self._containers.values():
            node.__exit__(None, None, None)
        self._containers.clear()
        if self._engine is not None:
            self._engine.__exit__(None, None, None)
            self._engine = None
        import shutil

        shutil.rmtree(self._dir, ignore_errors=True)
