"""A private Docker engine, started by hand and owned by one run.

No engine runs on these machines by default, and we never touch one that does: each run starts
its own ``dockerd`` with every path under a run-labelled directory::

    /var/lib/testbed/docker-<run>/   docker.sock  dockerd.pid  dockerd.log  daemon.json
                                     exec/ (exec-root)  data/ (data-root, unless a cache is given)

and networking switched off (``--bridge=none --iptables=false --ip-forward=false --ip-masq=false``):
containers get their network from a site's namespace (``container.py``), never from Docker.

``dockerd`` starts its own ``containerd`` as a child (config and socket under the exec-root),
unless ``/run/containerd/containerd.sock`` exists, in which case dockerd uses that system
containerd. Either way our containers live in the containerd namespace ``tb-<run>``, and their
cgroups under ``tb-<run>`` in every hierarchy (removed on exit; a handle for CPU-quota power caps).

``data_root``: image builds are slow, so a persistent data-root can be passed (for example
``/var/cache/testbed/docker``). It is kept on exit, locked while in use (``<data_root>.lock``),
and containers left in it by dead testbed runs (label ``testbed.run``) are removed on start.
Without it the data-root is per run and removed with everything else; images then come from the
cached rootfs tarball (``image.py``, ~2-3 s to import).
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from testbed.netem.owned.hostdirs import DEFAULT_BASE_DIR, engine_dir, unmount_under
from testbed.netem.owned.naming import check_run_id
from testbed.netem.owned.state import pid_cmdline
from testbed.runtime.errors import DockerCommandError, RuntimeUnavailable

INSTALL_HINT = "install Debian's docker.io (`apt-get install -y docker.io`; scripts/setup.sh does it as root)"
RUN_LABEL = "testbed.run"
SOCKET_PATH_MAX = 107
SHIM_SOCKET_DIRS = (Path("/run/containerd/s"), Path("/run/containerd"))  # fixed by containerd 1.6


def find_tools() -> dict[str, str]:
    """Paths of dockerd, docker, containerd and runc, or RuntimeUnavailable saying what to install."""
    if os.geteuid() != 0:
        raise RuntimeUnavailable("a private Docker engine needs root")
    found = {}
    for tool in ("dockerd", "docker", "containerd", "runc"):
        path = shutil.which(tool, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
        if path is None:
            raise RuntimeUnavailable(f"no `{tool}` found: {INSTALL_HINT}")
        found[tool] = path
    return found


class DockerEngine:
    """``with DockerEngine(run_id) as eng: eng.run("ps")`` — a private dockerd for one run.

    ``host`` is the ``-H`` URL; ``run(*args)`` runs the docker client against it. On exit the
    run's containers are removed, the daemon is stopped by its PID (SIGTERM, wait, SIGKILL), and
    the run directory is removed (a persistent ``data_root`` is kept)."""

    def __init__(self, run_id: str, *, data_root: str | Path | None = None, base_dir: str | Path = DEFAULT_BASE_DIR,
                 start_timeout_s: float = 60.0, stop_timeout_s: float = 20.0):
        self.run_id = check_run_id(run_id)
        self.run_dir = engine_dir(run_id, base_dir)
        self.exec_root = self.run_dir / "exec"
        self.socket = self.run_dir / "docker.sock"
        self.pidfile = self.run_dir / "dockerd.pid"
        self.log_path = self.run_dir / "dockerd.log"
        self.persistent = data_root is not None
        self.data_root = Path(data_root).resolve() if data_root is not None else self.run_dir / "data"
        self.start_timeout_s = start_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.host = f"unix://{self.socket}"
        self.cgroup_name = f"tb-{run_id}"  # containers' cgroups: <hierarchy>/tb-<run>/<container id>
        self.leftovers: list[str] = []  # what stop() could not remove (should stay empty)
        self.server_version: str | None = None
        self.start_s: float | None = None
        self._proc: subprocess.Popen | None = None
        self._pid: int | None = None
        self._lock_fd: int | None = None
        self._owns_dir = False
        self._shim_dirs_before: set[Path] | None = None  # set once we own a started engine
        self._tools: dict[str, str] = {}
        self._env: dict[str, str] = {}

    # -- lifecycle ------------------------------------------------------------------------------

    def __enter__(self) -> DockerEngine:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        """The daemon's PID (kept after stop, to check that it is gone)."""
        return self._pid

    def start(self) -> None:
        self._tools = find_tools()
        if len(str(self.socket)) > SOCKET_PATH_MAX:
            raise ValueError(f"socket path {self.socket} is longer than {SOCKET_PATH_MAX} characters")
        self.run_dir.mkdir(parents=True, exist_ok=False)  # a fresh, run-labelled directory
        self._owns_dir = True
        self._shim_dirs_before = {d for d in SHIM_SOCKET_DIRS if d.exists()}
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> None:
        t0 = time.perf_counter()
        if self.persistent:
            self._lock_data_root()
        (self.run_dir / "daemon.json").write_text("{}\n")  # never read /etc/docker/daemon.json
        (self.run_dir / "client").mkdir()
        self._env = {k: v for k, v in os.environ.items() if not k.startswith("DOCKER_")}
        self._env["DOCKER_CONFIG"] = str(self.run_dir / "client")
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(self.dockerd_argv(), stdin=subprocess.DEVNULL, stdout=log,
                                          stderr=subprocess.STDOUT, start_new_session=True)
        self._pid = self._proc.pid
        self._wait_ready()
        self.start_s = time.perf_counter() - t0
        if self.persistent:
            self._remove_containers(label=RUN_LABEL)  # left by dead runs: the lock says none is alive

    def dockerd_argv(self) -> list[str]:
        return [
            self._tools["dockerd"],
            "--data-root", str(self.data_root),
            "--exec-root", str(self.exec_root),
            "--pidfile", str(self.pidfile),
            "-H", self.host,
            "--config-file", str(self.run_dir / "daemon.json"),
            "--storage-driver=overlay2",
            "--iptables=false", "--ip-forward=false", "--ip-masq=false", "--bridge=none",
            "--cgroup-parent", f"/{self.cgroup_name}",
            "--containerd-namespace", f"tb-{self.run_id}",
            "--containerd-plugins-namespace", f"tb-{self.run_id}-plugins",
        ]

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        while True:
            if self._proc.poll() is not None:
                raise DockerCommandError(self.dockerd_argv(), self._proc.returncode, self.log_tail())
            if self.socket.exists():
                done = self._client("info", "--format", "{{.ServerVersion}}", timeout_s=10)
                if done.returncode == 0:
                    self.server_version = done.stdout.strip()
                    return
            if time.monotonic() > deadline:
                raise DockerCommandError(self.dockerd_argv(), -1, f"no answer on {self.host} after "
                                         f"{self.start_timeout_s:g} s; log:\n{self.log_tail()}")
            time.sleep(0.1)

    def stop(self) -> None:
        """Idempotent; safe after a failed start."""
        try:
            if self.running:
                try:
                    self._remove_containers(label=f"{RUN_LABEL}={self.run_id}")
                finally:
                    self._stop_daemon()
        finally:
            self._proc = None
            try:
                if self._owns_dir and self.run_dir.exists():
                    unmount_under(self.run_dir)
                    if self.persistent:
                        unmount_under(self.data_root)
                    shutil.rmtree(self.run_dir)
                self._owns_dir = False
            finally:
                self._remove_cgroups()
                self._remove_shim_dirs()
                self._unlock_data_root()

    def _stop_daemon(self) -> None:
        proc = self._proc
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=self.stop_timeout_s)
            return
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        self._end_orphans()

    def _end_orphans(self) -> None:
        """dockerd did not stop cleanly: end, each by PID, what it started and what outlives it —
        its containerd and the shims (their command lines name our run directory) and the containers'
        processes (the tasks of our run's cgroups) — and remove the shims' sockets, which containerd
        names sha256(<containerd socket>/<namespace>/<container id>) in /run/containerd/s."""
        ids, pids = set(), [p for p in _pids() if p != os.getpid() and str(self.run_dir) in pid_cmdline(p)]
        for root in cgroup_roots():
            top = root / self.cgroup_name
            if top.is_dir():
                ids |= {d.name for d in top.iterdir() if d.is_dir()}
                pids += [int(x) for procs in top.rglob("cgroup.procs") for x in procs.read_text().split()]
        for pid in set(pids):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 5.0
        while any(_running(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        address = f"{self.exec_root}/containerd/containerd.sock"
        for cid in ids:
            digest = hashlib.sha256(f"{address}/tb-{self.run_id}/{cid}".encode()).hexdigest()
            (SHIM_SOCKET_DIRS[0] / digest).unlink(missing_ok=True)

    def _remove_cgroups(self) -> None:
        """The run's parent cgroup in every hierarchy (empty once its containers are gone)."""
        for root in cgroup_roots():
            top = root / self.cgroup_name
            for path, _, _ in (os.walk(top, topdown=False) if top.is_dir() else ()):
                for attempt in range(20):  # EBUSY while the last tasks finish exiting
                    try:
                        os.rmdir(path)
                        break
                    except OSError as e:
                        if attempt == 19 or e.errno != errno.EBUSY:
                            self.leftovers.append(f"{path}: {e.strerror}")
                            break
                        time.sleep(0.05)

    def _remove_shim_dirs(self) -> None:
        """containerd puts shim sockets in /run/containerd/s whatever its state dir: remove those
        directories only if they did not exist before we started and are empty now."""
        before, self._shim_dirs_before = self._shim_dirs_before, None
        if before is None:
            return
        for d in SHIM_SOCKET_DIRS:
            if d not in before:
                try:
                    d.rmdir()
                except OSError:
                    pass  # not empty (another engine uses it) or already gone

    def _remove_containers(self, *, label: str) -> None:
        found = self._client("ps", "-aq", "--filter", f"label={label}", timeout_s=30)
        ids = found.stdout.split() if found.returncode == 0 else []
        if ids:
            self._client("rm", "-f", *ids, timeout_s=60)

    def _lock_data_root(self) -> None:
        self.data_root.parent.mkdir(parents=True, exist_ok=True)
        lock = Path(f"{self.data_root}.lock")
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise RuntimeUnavailable(f"data root {self.data_root} is in use by another engine ({lock} is locked)") from None
        self._lock_fd = fd

    def _unlock_data_root(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing releases the flock
            self._lock_fd = None

    # -- client ---------------------------------------------------------------------------------

    def run(self, *args: str, check: bool = True, input: str | bytes | None = None, timeout_s: float | None = 120.0,
            text: bool = True, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        """``docker -H <ours> ARGS...``; raises DockerCommandError on a non-zero exit if ``check``.
        ``env``: extra variables for the client (e.g. ``DOCKER_BUILDKIT=0``)."""
        if self._proc is None:
            raise RuntimeError("the engine is not started")
        done = self._client(*args, input=input, timeout_s=timeout_s, text=text, env=env)
        if check and done.returncode != 0:
            err = done.stderr if text else done.stderr.decode(errors="replace")
            raise DockerCommandError(done.args, done.returncode, err)
        return done

    def _client(self, *args: str, input=None, timeout_s: float | None, text: bool = True,
                env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        argv = [self._tools["docker"], "-H", self.host, *args]
        return subprocess.run(argv, input=input, capture_output=True, text=text, timeout=timeout_s,
                              env={**self._env, **env} if env else self._env,
                              stdin=subprocess.DEVNULL if input is None else None)

    def log_tail(self, n_lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n_lines:])
        except OSError:
            return ""


def cgroup_roots() -> list[Path]:
    """Mount points of the cgroup v1 hierarchies and of cgroup2."""
    roots = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        fstype = fields[fields.index("-") + 1]
        if fstype in ("cgroup", "cgroup2"):
            roots.append(Path(fields[4]))
    return roots


def _pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _running(pid: int) -> bool:
    """Alive and not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False
