"""A container whose processes live in a site's existing network namespace.

How (measured on these machines): the container is created with ``--network none`` and the
site's namespace file (``/var/run/netns/<ns>``, or any ``/proc/PID/ns/net``) bind-mounted
read-only at ``/run/testbed/netns``. Its command is wrapped as::

    nsenter --net=/run/testbed/netns -- setpriv --bounding-set -sys_admin --inh-caps -sys_admin -- CMD...

so the container's main process joins the site's namespace (setns needs CAP_SYS_ADMIN, the one
capability added) and then drops CAP_SYS_ADMIN from its bounding set before running CMD, which
ends with Docker's default capabilities. ``docker exec`` joins the namespaces of the main process
(``/proc/<pid>/ns/net``), so exec'd commands are in the site's namespace too; they are wrapped in
the same ``setpriv``. The site keeps its interfaces, addresses, routes and qdiscs: nothing is
moved, so the netns substrate and its rate replay work unchanged, and a server in the container
is reachable at the site's address. The namespace is checked (same inode) before ``start`` returns.

Cgroups: the container shares the host's cgroup namespace (``--cgroupns host``) and has the host's
``/sys/fs/cgroup`` bind-mounted (recursively, writable) at the same path, so ``/proc/self/cgroup``
names the container's own cgroup, ``<hierarchy>/tb-<run>/<container id>``, as a real, writable
directory. The CPU throttles (``testbed.power.throttle.throttle``) make their ``tb-<run>-<site>-<job>``
cgroups below it, exactly as on the host: the host's ``testbed clean`` and leftover checks find
them there, the throttle's ``close`` removes them, and a killed or removed container takes them
with it (runc removes the container's cgroup recursively). Measured here (cgroup v1): a loop in a
container under a 0.5-core quota used 0.51 CPU-seconds per second. On a cgroup2 host the
container's own cgroup holds its processes and so cannot delegate the ``cpu`` controller: the
throttles fall back as on such a host (duty-cycle; ``throttle: none`` for a user program) and
say why. The trade-off: processes in the container can write any of the host's cgroups.

The image must have ``nsenter`` and ``setpriv`` (util-linux; in every Debian image, minbase too).
Its own ``ENTRYPOINT`` and ``USER`` are overridden (nsenter first, as root); its ``ENV`` applies.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from testbed.netem.nsexec import ns_path
from testbed.runtime.dockerd import RUN_LABEL, DockerEngine
from testbed.runtime.errors import DockerCommandError

NETNS_MOUNT = "/run/testbed/netns"
CGROUP_ROOT = "/sys/fs/cgroup"
SITE_LABEL = "testbed.site"
DROP_SYS_ADMIN = ["setpriv", "--bounding-set", "-sys_admin", "--inh-caps", "-sys_admin", "--"]
ATTACH_TIMEOUT_S = 10.0
_NAME_RE = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]*$")
_HOSTNAME_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
_SYSTEM_PREFIXES = {"/", "/usr"}


@dataclass(frozen=True)
class Mount:
    src: str
    dst: str
    read_only: bool = True

    def arg(self) -> str:
        return f"{self.src}:{self.dst}" + (":ro" if self.read_only else "")


def host_python_mounts() -> list[Mount]:
    """Read-only mounts, at the same paths, of the host's interpreter install (``sys.base_prefix``,
    here pyenv's 3.11.7), its venv (``sys.prefix``) and the repository holding the testbed package,
    so ``host_python()`` inside the container is the same interpreter with the same packages.
    A system interpreter (prefix ``/usr``) is not mounted: the image's own Debian python3 is used."""
    import testbed

    wanted = [Path(sys.base_prefix), Path(sys.prefix), Path(testbed.__file__).parent.parent]
    chosen: list[Path] = []
    for p in sorted({w.resolve() for w in wanted}, key=lambda p: len(p.parts)):
        if str(p) not in _SYSTEM_PREFIXES and not any(p.is_relative_to(c) for c in chosen):
            chosen.append(p)
    return [Mount(str(p), str(p)) for p in chosen]


def host_python() -> str:
    """The interpreter to run inside a container that has ``host_python_mounts()``."""
    return sys.executable


def cgroup_args() -> list[str]:
    """The host's cgroup namespace and its whole cgroup tree, writable, at the same path, so that
    ``/proc/self/cgroup`` inside names real directories under ``/sys/fs/cgroup`` (the container's
    own cgroup, ``<hierarchy>/tb-<run>/<container id>``) and a throttle can make its
    ``tb-<run>-...`` cgroup below it (what kind and k3d do for nested engines). ``-v`` binds
    recursively, so every v1 hierarchy mounted under the tmpfs comes along; on a cgroup2 host it
    is the one unified mount."""
    return ["--cgroupns", "host", "-v", Mount(CGROUP_ROOT, CGROUP_ROOT, read_only=False).arg()]


class ContainerNode:
    """``with ContainerNode(engine, "rome", "tb-<run>-s-rome", argv, image=...) as node:`` runs
    ``argv`` in a container named ``tb-<run>-<site>``, labelled ``testbed.run=<run>``, whose
    processes are in the site's namespace. Teardown: ``docker rm -f`` of this container's id."""

    def __init__(self, engine: DockerEngine, site: str, netns: str, argv: list[str], *, image: str,
                 mounts: list[Mount] | tuple[Mount, ...] = (), env: dict[str, str] | None = None,
                 cap_add: tuple[str, ...] = (), workdir: str | None = None, host_python: bool = False,
                 gpus: str | None = None):
        self.engine = engine
        self.run_id = engine.run_id
        self.site = site
        self.name = f"tb-{self.run_id}-{site}"
        if not _NAME_RE.match(self.name):
            raise ValueError(f"site {site!r} does not make a valid container name ({self.name!r})")
        self.netns = netns
        self.argv = list(argv)
        self.image = image
        self.mounts = list(mounts) + (host_python_mounts() if host_python else [])
        self.env = {**({"PYTHONDONTWRITEBYTECODE": "1"} if host_python else {}), **(env or {})}
        self.cap_add = tuple(c.upper() for c in cap_add)
        self.gpus = gpus  # Docker device request, e.g. "all" or "device=0" (needs the NVIDIA container toolkit)
        self.workdir = workdir
        self.id: str | None = None
        self.pid: int | None = None
        self.start_s: float | None = None

    # -- lifecycle ------------------------------------------------------------------------------

    def __enter__(self) -> ContainerNode:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.remove()

    @property
    def netns_path(self) -> str:
        if self.pid is None:
            raise RuntimeError(f"container {self.name} is not running")
        return f"/proc/{self.pid}/ns/net"

    def create_args(self) -> list[str]:
        """The ``docker create`` arguments (command generation, kept apart from execution)."""
        args = ["create", "--name", self.name, "--label", f"{RUN_LABEL}={self.run_id}",
                "--label", f"{SITE_LABEL}={self.site}", "--network", "none", "--cap-add", "SYS_ADMIN",
                *cgroup_args()]
        if _HOSTNAME_RE.match(self.site):
            args += ["--hostname", self.site]
        for cap in self.cap_add:
            args += ["--cap-add", cap]
        if self.gpus:
            args += ["--gpus", self.gpus]
        args += ["-v", Mount(ns_path(self.netns), NETNS_MOUNT).arg()]
        for m in self.mounts:
            args += ["-v", m.arg()]
        for key, value in self.env.items():
            args += ["-e", f"{key}={value}"]
        if self.workdir:
            args += ["-w", self.workdir]
        # the image's own ENTRYPOINT and USER are not used: nsenter runs first, as root (setns needs it)
        args += ["--entrypoint", "nsenter", "--user", "0:0"]
        return [*args, self.image, f"--net={NETNS_MOUNT}", "--", *self._drop(), *self.argv]

    def start(self) -> None:
        t0 = time.perf_counter()
        self.id = self.engine.run(*self.create_args()).stdout.strip()
        try:
            self.engine.run("start", self.id)
            self._wait_attached()
        except BaseException:
            self.remove()
            raise
        self.start_s = time.perf_counter() - t0

    def _wait_attached(self) -> None:
        """Until the main process is in the site's namespace (nsenter has run), or it has died."""
        want = os.stat(ns_path(self.netns))
        deadline = time.monotonic() + ATTACH_TIMEOUT_S
        while True:
            running, pid, code = self.engine.run(
                "inspect", "--format", "{{.State.Running}} {{.State.Pid}} {{.State.ExitCode}}", self.id).stdout.split()
            if running != "true":
                raise DockerCommandError(["docker", "start", self.name], int(code), self.logs())
            try:
                got = os.stat(f"/proc/{pid}/ns/net")
                if (got.st_dev, got.st_ino) == (want.st_dev, want.st_ino):
                    self.pid = int(pid)
                    return
            except FileNotFoundError:
                pass
            if time.monotonic() > deadline:
                raise DockerCommandError(["docker", "start", self.name], -1,
                                         f"not in namespace {self.netns} after {ATTACH_TIMEOUT_S:g} s")
            time.sleep(0.02)

    def remove(self) -> None:
        """``docker rm -f`` of this container only; idempotent."""
        if self.id is None:
            return
        if not self.engine.running:  # the engine's own stop removed the run's containers
            self.id = self.pid = None
            return
        self.engine.run("rm", "-f", self.id, check=False, timeout_s=60)
        if self.engine.run("inspect", "--format", "{{.Id}}", self.id, check=False).returncode == 0:
            raise DockerCommandError(["docker", "rm", "-f", self.id], 1, f"container {self.name} is still there")
        self.id = self.pid = None

    # -- use ------------------------------------------------------------------------------------

    def exec(self, argv: list[str], *, input: str | bytes | None = None, env: dict[str, str] | None = None,
             workdir: str | None = None, timeout_s: float | None = 120.0, check: bool = False,
             text: bool = True) -> subprocess.CompletedProcess:
        """``docker exec`` in the container (and so in the site's namespace), without CAP_SYS_ADMIN."""
        if self.id is None:
            raise RuntimeError(f"container {self.name} is not started")
        args = ["exec"] + (["-i"] if input is not None else [])
        for key, value in (env or {}).items():  # the container's own env applies already
            args += ["-e", f"{key}={value}"]
        if workdir:
            args += ["-w", workdir]
        return self.engine.run(*args, self.id, *self._drop(), *argv, input=input, timeout_s=timeout_s,
                               check=check, text=text)

    def logs(self) -> str:
        done = self.engine.run("logs", self.id, check=False)
        return done.stdout + done.stderr

    def wait(self, timeout_s: float | None = None) -> int:
        """Block until the main process exits; its exit code."""
        return int(self.engine.run("wait", self.id, timeout_s=timeout_s).stdout.strip())

    def _drop(self) -> list[str]:
        return [] if "SYS_ADMIN" in self.cap_add else DROP_SYS_ADMIN
