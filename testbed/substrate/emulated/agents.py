"""Node agents, one per site, driven from the controller namespace over the management network only.

:class:`AgentPool` owns what every node runtime shares (the run's agent folder and token, readiness,
the clients, the throttle cgroups); a :class:`SiteLauncher` (the ``launcher`` of the scenario's
``emulation.runtime`` in :data:`testbed.node_kinds.NODE_RUNTIMES`) starts, kills and stops the agents.
:class:`ProcessLauncher` is the ``process`` runtime: a plain process in each site namespace; the
``docker`` runtime's is :class:`testbed.substrate.emulated.containers.DockerLauncher`."""

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
from testbed.netem.owned import state
from testbed.node_kinds import DEFAULT_RUNTIME, NODE_RUNTIMES
from testbed.netem.fabric import Fabric, FabricError
from testbed.netem.nsexec import socket_factory, spawn, terminate

CONTROL_PORT = 7100
TRANSFER_PORT = 7000
READY_TIMEOUT_S = 120.0


def agent_job_id(job_id: str) -> str:
    """Job ids as the control protocol accepts them ([A-Za-z0-9._-], 64 characters)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", job_id)[:64] or "job"


class SiteLauncher:
    """How a node runtime starts the agent of each site: one per :class:`AgentPool`, made by the
    runtime's ``launcher`` (:class:`testbed.node_kinds.NodeRuntime`). Each resource it makes is listed in
    the run's state file before it exists (``state.add(pool.run_id, ...)``), as everything live is."""

    def __init__(self, pool: "AgentPool"):
        self.pool = pool
        self.runtime_info: dict = {}  # what the manifest records of the runtime (docker: images per site)

    def start(self, site: str, argv: list[str]) -> None:
        """Start ``argv`` (the agent's command line; its folder is ``pool.workdir / site``) at ``site``."""
        raise NotImplementedError

    def exited(self, site: str) -> int | None:
        """The exit status of the agent at ``site`` if it has ended (checked while waiting for it to be
        ready), else None; None where the runtime cannot tell."""
        return None

    def kill(self, site: str) -> None:
        """End the agent at ``site`` at once (fault injection)."""
        raise NotImplementedError

    def stop(self, pids: list[int]) -> None:
        """End every agent and what the runtime made for them, appending each PID ended to ``pids``
        (the state file drops them). Runs inside ``critical()``; the pool's folder is removed after."""


class ProcessLauncher(SiteLauncher):
    """The ``process`` runtime: an agent process in each site namespace, in its own session (a
    terminal's Ctrl-C goes to testbed, which stops the agents in order)."""

    def __init__(self, pool: "AgentPool"):
        super().__init__(pool)
        self._procs: dict[str, subprocess.Popen] = {}

    def start(self, site: str, argv: list[str]) -> None:
        log = open(self.pool.workdir / site / "agent.log", "wb")  # noqa: SIM115 (the child keeps it)
        try:
            with critical():  # spawned and recorded as one step
                proc = spawn(self.pool.fabric.site_ns(site), argv, stdin=subprocess.DEVNULL,
                             stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
                self._procs[site] = proc
                state.add(self.pool.run_id, pids=[proc.pid])
        finally:
            log.close()

    def exited(self, site: str) -> int | None:
        proc = self._procs.get(site)
        return None if proc is None else proc.poll()

    def kill(self, site: str) -> None:
        proc = self._procs[site]
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)

    def stop(self, pids: list[int]) -> None:
        procs = list(self._procs.values())
        terminate(procs, timeout_s=10)
        pids += [p.pid for p in procs]  # ended: the state file may drop them
        self._procs.clear()


class AgentPool:
    """An agent per site, started by the launcher of ``runtime`` (a registered node runtime:
    ``process``, ``docker``, or a plug-in's). ``images``: a user's image source per site with the field
    naming it (``site_image_sources``; others run the base image); ``program_dirs``: host folders of
    user programs (their cwd), mounted at the same paths in containers."""

    def __init__(self, fabric: Fabric, token: str, *, runtime: str = DEFAULT_RUNTIME, images: dict | None = None,
                 program_dirs: tuple[str, ...] = (), warm_torch: bool = False):
        if runtime not in NODE_RUNTIMES:
            raise ValueError(f"unknown runtime {runtime!r}")
        self.fabric = fabric
        self.runtime = runtime
        self.image_sources = dict(images or {})
        self.program_dirs = tuple(program_dirs)
        self._warm_torch = warm_torch  # the agents import torch at start (jobs of the stand-in trainer will run)
        self._token = token
        # named now; listed in the run's state file, then made, by start()
        self.workdir = Path(tempfile.gettempdir()) / f"tb-{fabric.plan.run_id}-agents-{secrets.token_hex(4)}"
        self._made_dir = False
        self._clients: dict[str, AgentClient] = {}
        self._cgroups: list[str] = []  # throttle cgroups the agents may make (listed before they do)
        self._executor = None  # map_sites: a thread per agent, made on first use
        self._launcher: SiteLauncher = NODE_RUNTIMES.get(runtime).hook("launcher")(self)

    @property
    def run_id(self) -> str:
        return self.fabric.plan.run_id

    @property
    def runtime_info(self) -> dict:
        """What the manifest records of the runtime (filled by :meth:`start`; the same dict after)."""
        return self._launcher.runtime_info

    def keep_cgroup(self, name: str) -> None:
        """A cgroup already listed in the run's state file: :meth:`stop` takes it off the list once gone."""
        if name not in self._cgroups:
            self._cgroups.append(name)

    def start(self) -> None:
        """Start an agent per site; each resource is listed in the state file before it exists."""
        with critical():
            state.add(self.run_id, tmp_dirs=[str(self.workdir)])
            self.workdir.mkdir(mode=0o700)
            self._made_dir = True
        token_file = self.workdir / "token"
        token_file.write_text(self._token)
        os.chmod(token_file, 0o600)
        plan = self.fabric.plan
        for s in plan.sites:
            work = self.workdir / s.name
            work.mkdir()
            argv = [sys.executable, "-m", "testbed.agent", "--site", s.name, "--mgmt-addr", s.mgmt_addr,
                    "--port", str(CONTROL_PORT), "--wan-addr", s.addr, "--transfer-port", str(TRANSFER_PORT),
                    "--token-file", str(token_file), "--workdir", str(work), "--ready-file", str(work / "ready"),
                    "--run-id", plan.run_id] + (["--warm-torch"] if self._warm_torch else [])
            self._launcher.start(s.name, argv)
        deadline = time.monotonic() + READY_TIMEOUT_S
        for s in plan.sites:
            while not (self.workdir / s.name / "ready").exists():
                if (code := self._launcher.exited(s.name)) is not None:
                    log = (self.workdir / s.name / "agent.log").read_text(errors="replace")[-2000:]
                    raise FabricError(f"agent at {s.name} exited with {code}: {log}")
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
        self._launcher.kill(site)

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
            pids: list[int] = []
            try:
                self._launcher.stop(pids)
            finally:
                shutil.rmtree(self.workdir, ignore_errors=True)
                left = {p.name for _, p in find_cgroups_named(self._cgroups)} if self._cgroups else set()
                gone = [c for c in self._cgroups if c not in left]
                self._cgroups = [c for c in self._cgroups if c in left]
                state.discard(self.run_id, pids=pids, cgroups=gone,
                              tmp_dirs=[str(self.workdir)] if self._made_dir and not self.workdir.exists() else [])
