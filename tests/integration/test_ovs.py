"""Open vSwitch with its kernel datapath: two site namespaces joined by an OVS bridge forward
traffic, and a netem qdisc on a bridge port delays it (Mininet's OVS + TCLink arrangement).

This host has no Open vSwitch; ``testbed vm test`` runs this in a qemu guest that has it
(openvswitch-switch in the image). Where no OVS is running, the test starts a private
ovsdb-server and ovs-vswitchd in a temporary directory and ends them by PID; where one runs, it
uses it and removes only the bridge it made.
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from testbed.netem.owned.naming import if_name, new_run_id, ns_name
from testbed.netem.nsexec import ipr_in, spawn, terminate
from tests.integration.guest_support import netem_available, record

pytestmark = [pytest.mark.root, pytest.mark.ovs]
SCHEMA = Path("/usr/share/openvswitch/vswitch.ovsschema")
SYSTEM_DB = Path("/var/run/openvswitch/db.sock")
DAEMONS = ("ovsdb-tool", "ovsdb-server", "ovs-vswitchd", "ovs-vsctl")


def _which(tool: str) -> str | None:
    return shutil.which(tool) or shutil.which(tool, path="/usr/sbin:/sbin")


class Ovs:
    def __init__(self, db: str | None):
        self.db = db

    def vsctl(self, *args: str) -> str:
        db = [f"--db=unix:{self.db}"] if self.db else []
        done = subprocess.run([_which("ovs-vsctl"), *db, "--timeout=60", *args], capture_output=True, text=True,
                              timeout=90)
        assert done.returncode == 0, done.stderr
        return done.stdout


def _wait_for(path: Path, proc: subprocess.Popen, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert proc.poll() is None, f"{proc.args[0]} exited with {proc.returncode}"
        assert time.monotonic() < deadline, f"{path} did not appear within {timeout_s} s"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def ovs():
    missing = [t for t in DAEMONS if _which(t) is None]
    if missing or not SCHEMA.exists():
        pytest.skip(f"Open vSwitch is not installed ({', '.join(missing) or SCHEMA}); "
                    "`testbed vm test` runs this in a qemu guest that has it")
    if SYSTEM_DB.exists():
        yield Ovs(None)
        return
    if subprocess.run(["modprobe", "openvswitch"], capture_output=True).returncode != 0:
        pytest.skip("no openvswitch kernel module (the OVS kernel datapath is absent)")
    tmp = Path(tempfile.mkdtemp(prefix="tb-ovs-"))
    env = {**os.environ, **{k: str(tmp) for k in ("OVS_RUNDIR", "OVS_LOGDIR", "OVS_DBDIR", "OVS_SYSCONFDIR")}}
    procs: list[subprocess.Popen] = []
    try:
        db, sock = tmp / "conf.db", tmp / "db.sock"
        subprocess.run([_which("ovsdb-tool"), "create", str(db), str(SCHEMA)], check=True, env=env, timeout=60)
        common = ["--no-chdir", f"--log-file={tmp}/%s.log"]
        procs.append(subprocess.Popen([_which("ovsdb-server"), str(db), f"--remote=punix:{sock}",
                                       f"--unixctl={tmp}/ovsdb.ctl", common[0], common[1] % "ovsdb"], env=env))
        _wait_for(sock, procs[0])
        Ovs(str(sock)).vsctl("--no-wait", "init")
        procs.append(subprocess.Popen([_which("ovs-vswitchd"), f"unix:{sock}", f"--unixctl={tmp}/vswitchd.ctl",
                                       common[0], common[1] % "vswitchd"], env=env))
        _wait_for(tmp / "vswitchd.ctl", procs[1])
        yield Ovs(str(sock))
    finally:
        terminate(procs, timeout_s=10)
        shutil.rmtree(tmp, ignore_errors=True)


def _ping_median_ms(ns: str, addr: str, n: int) -> float:
    """Median ICMP RTT (per-packet times; the first ping, which waits for ARP, is not counted)."""
    proc = spawn(ns, ["ping", "-n", "-c", str(n + 1), "-i", "0.05", "-W", "2", addr],
                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out, _ = proc.communicate(timeout=60)
    times = [float(t) for t in re.findall(r"time=([\d.]+) ms", out)][1:]
    assert proc.returncode == 0 and len(times) >= n - 1, out
    return statistics.median(times)


@pytest.fixture(scope="module")
def bridge(ovs):
    """Two namespaces (10.203.0.1 and .2) on one OVS bridge with the kernel datapath."""
    from pyroute2 import IPRoute, netns

    run = new_run_id()
    br = if_name(run, "ovs")
    sites = [(ns_name(run, f"o{i}"), if_name(run, f"o{i}s"), if_name(run, f"o{i}b"), f"10.203.0.{i + 1}")
             for i in range(2)]
    made: list[str] = []
    try:
        ovs.vsctl("add-br", br, "--", "set", "bridge", br, "datapath_type=system")
        with IPRoute() as ipr:
            for ns, inner, outer, addr in sites:
                netns.create(ns)
                made.append(ns)
                ipr.link("add", ifname=outer, kind="veth", peer={"ifname": inner, "net_ns_fd": ns})
                ipr.link("set", index=ipr.link_lookup(ifname=outer)[0], state="up")
                ovs.vsctl("add-port", br, outer)
                with ipr_in(ns) as n:
                    i = n.link_lookup(ifname=inner)[0]
                    n.addr("add", index=i, address=addr, prefixlen=24)
                    n.link("set", index=i, state="up")
        yield {"name": br, "sites": sites}
    finally:
        ovs.vsctl("--if-exists", "del-br", br)
        for ns in made:
            netns.remove(ns)


def test_ovs_kernel_datapath_forwards(ovs, bridge):
    assert ovs.vsctl("get", "bridge", bridge["name"], "datapath_type").strip() == "system"
    (ns_a, *_), (_, _, _, addr_b) = bridge["sites"]
    rtt = _ping_median_ms(ns_a, addr_b, 5)
    record("ovs", ping_ms=rtt)
    assert Path("/sys/module/openvswitch").is_dir()  # forwarded by the kernel datapath


@pytest.mark.netem
def test_netem_on_an_ovs_port(bridge):
    if not netem_available():
        pytest.skip("this kernel has no sch_netem qdisc")
    (ns_a, if_a, _, _), (_, _, _, addr_b) = bridge["sites"]
    plain = _ping_median_ms(ns_a, addr_b, 10)
    with ipr_in(ns_a) as n:  # 10 ms on a's side of the bridge
        n.tc("add", "netem", index=n.link_lookup(ifname=if_a)[0], handle="1:", delay=10_000)
    try:
        delayed = _ping_median_ms(ns_a, addr_b, 10)
    finally:
        with ipr_in(ns_a) as n:
            n.tc("del", "netem", index=n.link_lookup(ifname=if_a)[0], handle="1:")
    record("ovs_netem", configured_ms=10.0, ping_plain_ms=plain, ping_delayed_ms=delayed)
    assert abs(delayed - plain - 10.0) <= 1.0 + 0.05 * 10.0
