"""Open vSwitch for a Mininet ``OVSBridge``: the machine's own, or a private one started for the network.

- Where the system's ovsdb answers (``ovs-vsctl show``, the openvswitch-switch service), Mininet
  uses it, as it always does.
- Otherwise a private ``ovsdb-server`` and ``ovs-vswitchd`` are started for the network, with their
  database, sockets, pid and log files in the fabric's temporary folder; ``OVS_RUNDIR`` points
  Mininet's ``ovs-vsctl`` calls at them while the network is up. They are ended by PID (listed in
  the run's state file) when it goes down. Nothing system-wide is touched.
- The datapath: the kernel's where the openvswitch module is loaded, else Open vSwitch's userspace
  datapath (``datapath_type=netdev``: ovs-vswitchd forwards the frames itself; its bridge port is a
  tap device, so it needs ``/dev/net/tun``). The management network carries control messages only,
  so the userspace datapath's lower throughput costs nothing measured.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

from testbed.netem.owned.clean import OVS_NETDEV_IF as NETDEV_IF  # the userspace datapath's own device (made by ovs-vswitchd)

SCHEMA = Path("/usr/share/openvswitch/vswitch.ovsschema")
TUN = Path("/dev/net/tun")  # the userspace datapath's bridge port is a tap device
DAEMONS = ("ovsdb-tool", "ovsdb-server", "ovs-vswitchd")
_SBIN = "/usr/sbin:/sbin:/usr/bin:/bin"
START_TIMEOUT_S = 20.0


class OvsError(RuntimeError):
    """The private Open vSwitch did not start."""


def which(tool: str) -> str | None:
    return shutil.which(tool) or shutil.which(tool, path=_SBIN)


def kernel_datapath() -> bool:
    return Path("/sys/module/openvswitch").is_dir()


def datapath() -> str:
    """Mininet's ``datapath=`` for an OVSSwitch here: ``kernel`` where the module is loaded, else ``user``."""
    return "kernel" if kernel_datapath() else "user"


def system_ovs_answers() -> bool:
    """Whether the system's ovsdb (the default socket, not a private one) answers ``ovs-vsctl show``."""
    env = {k: v for k, v in os.environ.items() if k != "OVS_RUNDIR"}
    try:
        r = subprocess.run([which("ovs-vsctl"), "-t", "2", "show"], capture_output=True, timeout=5, env=env)
    except subprocess.TimeoutExpired:
        return False
    return r.returncode == 0


def ovs_unavailable() -> str | None:
    """Why an OVSBridge cannot run here, or None (one line, said before anything is built)."""
    if which("ovs-vsctl") is None:
        return "switch 'ovs': no Open vSwitch here (ovs-vsctl not found; apt-get install openvswitch-switch)"
    if not kernel_datapath() and not TUN.exists():
        return ("switch 'ovs': no datapath (the openvswitch kernel module is not loaded, and the userspace "
                "datapath needs /dev/net/tun)")
    if system_ovs_answers():
        return None
    missing = [t for t in DAEMONS if which(t) is None] + ([] if SCHEMA.exists() else [str(SCHEMA)])
    if missing:
        return (f"switch 'ovs': no ovsdb answers and a private one cannot be started ({', '.join(missing)} "
                "missing; apt-get install openvswitch-switch)")
    return None


class PrivateOvs:
    """ovsdb-server + ovs-vswitchd in ``folder`` (not detached: our children, ended by PID)."""

    def __init__(self, folder: str) -> None:
        self.folder = Path(folder)
        self.procs: list[subprocess.Popen] = []
        self._saved_rundir: str | None = None
        self.owns_netdev = False  # ``ovs-netdev`` is this instance's (it did not exist before)
        self._env_set = False

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def start(self, on_started=lambda pid: None) -> None:
        """Start both daemons; ``on_started(pid)`` right after each starts (to list it). Points this
        process's ``ovs-vsctl`` calls (Mininet's) at the private database until :meth:`stop`."""
        d = self.folder
        d.mkdir(mode=0o700, exist_ok=True)
        env = {**os.environ, **{k: str(d) for k in ("OVS_RUNDIR", "OVS_LOGDIR", "OVS_DBDIR", "OVS_SYSCONFDIR")}}
        db, sock = d / "conf.db", d / "db.sock"
        subprocess.run([which("ovsdb-tool"), "create", str(db), str(SCHEMA)], check=True, env=env,
                       capture_output=True, timeout=30)
        common = ["--no-chdir", f"--pidfile={d}/%s.pid", f"--log-file={d}/%s.log"]
        self._spawn([which("ovsdb-server"), str(db), f"--remote=punix:{sock}", f"--unixctl={d}/ovsdb.ctl",
                     common[0], common[1] % "ovsdb-server", common[2] % "ovsdb-server"], env, on_started)
        self._wait_for(sock)
        subprocess.run([which("ovs-vsctl"), f"--db=unix:{sock}", "--no-wait", "init"], check=True, env=env,
                       capture_output=True, timeout=30)
        self._spawn([which("ovs-vswitchd"), f"unix:{sock}", f"--unixctl={d}/vswitchd.ctl", common[0],
                     common[1] % "ovs-vswitchd", common[2] % "ovs-vswitchd"], env, on_started)
        self._wait_for(d / "vswitchd.ctl")
        self._saved_rundir = os.environ.get("OVS_RUNDIR")
        os.environ["OVS_RUNDIR"] = str(d)
        self._env_set = True

    def _spawn(self, argv: list[str], env: dict, on_started) -> None:
        self.procs.append(subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                           stderr=subprocess.DEVNULL, start_new_session=True))
        on_started(self.procs[-1].pid)

    def _wait_for(self, path: Path) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        proc = self.procs[-1]
        while not path.exists():
            if proc.poll() is not None:
                raise OvsError(f"{Path(proc.args[0]).name} exited with {proc.returncode} "
                               f"(its log: {self.folder}/{Path(proc.args[0]).name}.log)")
            if time.monotonic() > deadline:
                raise OvsError(f"{Path(proc.args[0]).name} did not open {path.name} within {START_TIMEOUT_S:g} s")
            time.sleep(0.02)

    def stop(self) -> None:
        """End both daemons by PID (ovs-vswitchd first: it removes its datapath's devices as it exits)."""
        from testbed.netem.nsexec import terminate

        if self._env_set:
            if self._saved_rundir is None:
                os.environ.pop("OVS_RUNDIR", None)
            else:
                os.environ["OVS_RUNDIR"] = self._saved_rundir
            self._env_set = False
        for p in reversed(self.procs):
            terminate([p], timeout_s=5)
            if p.returncode is None:
                # a multi-threaded daemon shows as a zombie while its other threads still exit: the
                # stop counts it as ended before it can be reaped; reap it here, once it has exited
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
        self.procs.clear()
        if self.owns_netdev:  # removed by ovs-vswitchd with its last bridge; a daemon cut short leaves it
            from pyroute2 import IPRoute

            with IPRoute() as ipr:
                for index in ipr.link_lookup(ifname=NETDEV_IF):
                    ipr.link("del", index=index)
