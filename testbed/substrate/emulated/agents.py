"""Node agents as processes in their site namespaces (the ``process`` runtime), driven from the
controller namespace over the management network only."""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from testbed.agent.client import AgentClient, AgentError
from testbed.lifecycle import critical
from testbed.netem import state
from testbed.netem.fabric import Fabric, FabricError
from testbed.netem.nsexec import socket_factory, spawn, terminate

CONTROL_PORT = 7100
TRANSFER_PORT = 7000
READY_TIMEOUT_S = 120.0
DOCKER_DATA_ROOT = Path("/var/lib/testbed/docker-data")  # image cache kept between runs (locked while in use)


def agent_job_id(job_id: str) -> str:
    """Job ids as the control protocol accepts them ([A-Za-z0-9._-], 64 characters)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", job_id)[:64] or "job"


class AgentPool:
    """``runtime``: ``process`` (an agent process in each site namespace) or ``docker`` (an agent
    in a container per site whose processes live in the site's namespace, the Containernet way;
    a private Docker engine is started for the run and stopped after it). ``images``: a user's image
    source per site with the field naming it (``site_image_sources``; others run the base image); ``program_dirs``: host
    folders of user programs (their cwd), mounted at the same paths in the containers."""

    def __init__(self, fabric: Fabric, token: str, *, runtime: str = "process", images: dict | None = None,
                 program_dirs: tuple[str, ...] = (), warm_torch: bool = False):
        if runtime not in ("process", "docker"):
            raise ValueError(f"unknown runtime {runtime!r}")
        self.fabric = fabric
        self.runtime = runtime
        self._image_sources = dict(images or {})
        self._program_dirs = tuple(program_dirs)
        self._warm_torch = warm_torch  # the agents import torch at start (jobs of the stand-in trainer will run)
        self.runtime_info: dict = {}  # docker: the images per site (the manifest records it)
        self._token = token
        self._engine = None
        self._containers: dict = {}
        # named now; listed in the run's state file, then made, by start()
        self._dir = Path(tempfile.gettempdir()) / f"tb-{fabric.plan.run_id}-agents-{secrets.token_hex(4)}"
        self._made_dir = False
        self._procs: dict[str, subprocess.Popen] = {}
        self._clients: dict[str, AgentClient] = {}
        self._cgroups: list[str] = []  # throttle cgroups the agents may make (listed before they do)
        self._executor = None  # map_sites: a thread per agent, made on first use

    @property
    def run_id(self) -> str:
        return self.fabric.plan.run_id

    def start(self) -> None:
        """Start an agent per site; each resource is listed in the state file before it exists."""
        with critical():
            state.add(self.run_id, tmp_dirs=[str(self._dir)])
            self._dir.mkdir(mode=0o700)
            self._made_dir = True
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
                    "--run-id", plan.run_id] + (["--warm-torch"] if self._warm_torch else [])
            if self.runtime == "docker":
                self._start_container(s.name, argv)
                continue
            log = open(work / "agent.log", "wb")  # noqa: SIM115 (the child keeps it)
            try:
                with critical():  # spawned and recorded as one step
                    # own session: a terminal's Ctrl-C goes to testbed, which stops the agents in order
                    proc = spawn(self.fabric.site_ns(s.name), argv, stdin=subprocess.DEVNULL,
                                 stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
                    self._procs[s.name] = proc
                    state.add(self.run_id, pids=[proc.pid])
            finally:
                log.close()
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
        for s in plan.sites:  # over the management network, as every command goes: fails here, not mid-run
            try:
                self._clients[s.name].ping()
            except AgentError as e:
                raise FabricError(f"agent at {s.name} is up but not reachable from the controller over the "
                                  f"management network: {e}") from None

    def _start_engine(self) -> None:
        """The run's engine, the base image, each site's own image (built or loaded, then checked to
        run the agent: refused before any container starts), and the GPU request."""
        from testbed.runtime import DockerEngine, ensure_base_image
        from testbed.runtime.gpus import gpu_request
        from testbed.runtime.image import BaseImageRecipe
        from testbed.runtime.user_image import UserImageError, check_runs_agent, ensure_user_image

        engine = DockerEngine(self.fabric.plan.run_id, data_root=DOCKER_DATA_ROOT)
        state.add(self.run_id, cgroups=[engine.cgroup_name], engine_dirs=[str(engine.run_dir)])
        self._cgroups.append(engine.cgroup_name)
        self._engine = engine
        self._engine.__enter__()
        state.add(self.run_id, pids=[self._engine.pid])  # testbed clean ends it by PID
        self._image = ensure_base_image(self._engine)
        made: dict = {}
        self._site_images = {}
        for site, (field, src) in self._image_sources.items():
            if src not in made:
                try:
                    made[src] = ensure_user_image(self._engine, src, base_key=BaseImageRecipe().content_hash())
                    check_runs_agent(self._engine, made[src])
                except UserImageError as e:  # the scenario's field first, as spec errors are
                    raise UserImageError(f"{field}: {e}") from None
            self._site_images[site] = made[src]
        self._gpus, gpu_note = gpu_request()
        base_id = self._engine.run("image", "inspect", "--format", "{{.Id}}", self._image.tag).stdout.strip()
        self.runtime_info.update({
            "base_image": {"tag": self._image.tag, "id": base_id, "source": self._image.source},
            "images": {s.name: (self._site_images[s.name].describe() if s.name in self._site_images
                                else {"tag": self._image.tag, "id": base_id, "from": "testbed-base"})
                       for s in self.fabric.plan.sites},
            "gpus": self._gpus or "none", **({"gpu_note": gpu_note} if gpu_note else {}),
        })

    def _start_container(self, site: str, argv: list[str]) -> None:
        from testbed.runtime import ContainerNode
        from testbed.runtime.container import Mount

        if self._engine is None:
            self._start_engine()
        image = self._site_images[site].tag if site in self._site_images else self._image.tag
        mounts = [Mount(str(self._dir), str(self._dir), read_only=False)]
        # a program's host folder, at the same path and writable as in the process runtime; a cwd the
        # host does not have is the image's own
        mounts += [Mount(d, d, read_only=False) for d in self._program_dirs if Path(d).is_dir() and d != "/"]
        node = ContainerNode(self._engine, site, self.fabric.site_ns(site), argv, image=image, mounts=mounts,
                             host_python=True, gpus=self._gpus)
        node.__enter__()
        self._containers[site] = node

    def client(self, site: str) -> AgentClient:
        return self._clients[site]

    def map_sites(self, fn, sites: list[str]) -> list:
        """``fn(site)`` for each site, the sites concurrently (each has its own connection): the
        controller waits for one round trip, not one per agent. Results in the order of ``sites``;
        ``fn``'s exception is raised here."""
        if len(sites) <= 1:
            return [fn(s) for s in sites]
        from testbed import step_profile

        if self._executor is None:
            from concurrent.futures import ThreadPoolExecutor

            self._executor = ThreadPoolExecutor(max_workers=max(2, len(self.fabric.plan.sites)),
                                                thread_name_prefix="tb-agent-rpc")
        step_profile.count_rpc(len(sites))  # one round trip the controller waits for
        with step_profile.part("rpc"):
            return list(self._executor.map(fn, sites))

    def expect_throttle(self, site: str, job_id: str) -> None:
        """List the CPU-throttle cgroup the agent at ``site`` makes for ``job_id`` (on its first
        ``set_throughput``) in the state file, before it is made."""
        from testbed.power.throttle.cgroups import cgroup_name

        try:
            name = cgroup_name(self.run_id, f"{site}-{job_id}")
        except ValueError:
            return  # the agent refuses such a tag too (no cgroup is made)
        if name not in self._cgroups:
            state.add(self.run_id, cgroups=[name])
            self._cgroups.append(name)

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
        """Idempotent, and not cut short by Ctrl-C/SIGTERM (deferred until it is done)."""
        import shutil

        from testbed.power.throttle.cgroups import find_cgroups_named

        with critical():
            if self._executor is not None:
                executor, self._executor = self._executor, None
                executor.shutdown(wait=True)
            for c in self._clients.values():
                c.close()
            self._clients.clear()
            pids = [p.pid for p in self._procs.values()]
            terminate(self._procs.values(), timeout_s=10)
            self._procs.clear()
            try:
                for node in self._containers.values():
                    node.__exit__(None, None, None)
                self._containers.clear()
                if self._engine is not None:
                    engine, self._engine = self._engine, None
                    if engine.pid:
                        pids.append(engine.pid)
                    engine.__exit__(None, None, None)
                    if not engine.run_dir.exists():
                        state.discard(self.run_id, engine_dirs=[str(engine.run_dir)])
            finally:
                shutil.rmtree(self._dir, ignore_errors=True)
                left = {p.name for _, p in find_cgroups_named(self._cgroups)} if self._cgroups else set()
                gone = [c for c in self._cgroups if c not in left]
                self._cgroups = [c for c in self._cgroups if c in left]
                state.discard(self.run_id, pids=pids, cgroups=gone,
                              tmp_dirs=[str(self._dir)] if self._made_dir and not self._dir.exists() else [])
