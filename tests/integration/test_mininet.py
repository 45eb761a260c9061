"""The Mininet-built fabric: TCLink-style shaping applied or refused, never ignored."""

from __future__ import annotations

import psutil
import pytest

from testbed.netem.fabric import FabricError
from testbed.netem.owned.naming import new_run_id
from testbed.netem.nsexec import ipr_in
from testbed.netem.plan import LinkInput, plan_fabric
from tests.integration.conftest import assert_link_queue, goodput_mbit

pytestmark = pytest.mark.root
mininet = pytest.importorskip("mininet.net", reason="mininet (pip mininet==2.3.0.dev6) is installed by scripts/setup.sh")


def _root_links_of(run_id: str) -> list[str]:
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        return [lk.get_attr("IFLA_IFNAME") for lk in ipr.get_links() if run_id in (lk.get_attr("IFLA_IFNAME") or "")]


def test_bw_above_1000_is_applied_and_changed_in_place():
    from mininet.log import setLogLevel

    from testbed.substrate.mininet.fabric import MininetFabric

    setLogLevel("error")
    plan = plan_fabric(new_run_id(), ["a", "b", "c"],
                       [LinkInput("a", "b", 1500, 1500), LinkInput("b", "c", 50, 50)], "none")
    with MininetFabric(plan) as fab:
        g = goodput_mbit(fab.site_ns("a"), fab.site_ns("b"), fab.site_addr("b"), 150_000_000)
        assert g > 1200  # stock Mininet would have ignored bw=1500 and left the link unshaped or at 1000
        assert g < 1500 * 1.03
        g2 = goodput_mbit(fab.site_ns("a"), fab.site_ns("c"), fab.site_addr("c"), 8_000_000, port=5202)
        assert 0.94 * 50 <= g2 <= 53
        assert fab.set_rate("a", "b", 100) < 0.1
        g3 = goodput_mbit(fab.site_ns("a"), fab.site_ns("b"), fab.site_addr("b"), 15_000_000, port=5203)
        assert 0.94 * 100 <= g3 <= 103
        # the management bridge and its ports live in the switch's own namespace, as on netns: nothing of
        # the run is in the root namespace, where the host's firewall would see bridged frames
        assert _root_links_of(plan.run_id) == []
        with ipr_in(fab._ns(plan.mgmt_ns)) as n:
            br = n.link_lookup(ifname=plan.mgmt_bridge)[0]
            ports = {lk.get_attr("IFLA_IFNAME") for lk in n.get_links() if lk.get_attr("IFLA_MASTER") == br}
        assert ports == {s.mgmt_peer_if for s in plan.sites} | {plan.ctl_peer_if}
        pids = list(fab._host_pids)
    assert _root_links_of(plan.run_id) == []
    assert not [p for p in pids if psutil.pid_exists(p)]  # Mininet's host shells (and the switch's) ended


def test_ovs_switch_in_process_carries_tcp_and_leaves_nothing():
    """The ovs switch built in this process (as ``testbed run`` builds it): the management ports on
    the OVS bridge, TCP between a site and the controller over it, a private Open vSwitch (where
    the system's does not answer) listed in the state file while up and ended with the network."""
    import os
    import subprocess

    from mininet.log import setLogLevel

    from testbed.netem.owned import state
    from testbed.substrate.mininet.fabric import MininetFabric
    from testbed.substrate.mininet.ovs import which
    from testbed.substrate.mininet.switches import switch_unavailable

    if why := switch_unavailable("ovs"):
        pytest.skip(why)
    setLogLevel("error")
    rundir = os.environ.get("OVS_RUNDIR")
    plan = plan_fabric(new_run_id(), ["a", "b"], [LinkInput("a", "b", 50, 50)], "none")
    with MininetFabric(plan, switch="ovs") as fab:
        ports = subprocess.run([which("ovs-vsctl"), "list-ports", plan.mgmt_bridge], capture_output=True, text=True,
                               check=True, timeout=30).stdout.split()
        assert sorted(ports) == sorted([s.mgmt_peer_if for s in plan.sites] + [plan.ctl_peer_if])
        g = goodput_mbit(fab._ns(plan.ctl_ns), fab._ns(plan.sites[1].ns), plan.sites[1].mgmt_addr, 4_000_000)
        assert g > 0
        daemons = fab._ovs.pids if fab._ovs else []
        assert set(daemons) <= set(state.read(plan.run_id)["pids"])
    assert not [p for p in daemons if psutil.pid_exists(p)] and os.environ.get("OVS_RUNDIR") == rundir
    assert _root_links_of(plan.run_id) == [] and state.read(plan.run_id) is None


def test_refuses_what_it_cannot_apply(monkeypatch):
    from mininet.log import setLogLevel

    from testbed.substrate.mininet import fabric as mf

    setLogLevel("critical")
    # an interface class that (like stock Mininet with bw > 1000) silently applies nothing
    monkeypatch.setattr(mf, "_intf_class", lambda: __import__("mininet.link", fromlist=["TCIntf"]).TCIntf)
    plan = plan_fabric(new_run_id(), ["a", "b"], [LinkInput("a", "b", 1500, 1500)], "none")
    with pytest.raises(FabricError, match="did not apply bw=1500"):
        with mf.MininetFabric(plan):
            pass
    assert _root_links_of(plan.run_id) == []


_TCP = """import hashlib, socket, sys
data = bytes(range(256)) * 4096  # 1 MiB, answered with its length and hash
if sys.argv[1] == "serve":
    s = socket.create_server((sys.argv[2], 7999)); c, _ = s.accept(); h = hashlib.sha256(); n = 0
    while (b := c.recv(65536)):
        h.update(b); n += len(b)
    c.sendall(f"{n} {h.hexdigest()}".encode())
else:
    c = socket.create_connection((sys.argv[2], 7999), timeout=10); c.sendall(data); c.shutdown(socket.SHUT_WR)
    ok = c.recv(200).decode() == f"{len(data)} {hashlib.sha256(data).hexdigest()}"
    print("management tcp", "ok" if ok else "corrupt")
"""


@pytest.mark.parametrize("switch", ["lxbr", "ovs"])
def test_net_up_with_a_switch_holds_a_mininet_network_with_its_cli(switch, tmp_path):
    """``testbed net up FILE --switch lxbr|ovs``: Mininet's CLI by site name over the shaped links,
    TCP over the management switch (what the controller and agents speak), the network visible to
    ``net status`` / ``net exec`` while held, and gone when the CLI exits (with a private Open
    vSwitch, its daemons too). ``ovs`` is skipped, saying why, where Open vSwitch cannot run."""
    import json
    import subprocess
    import sys

    from testbed.substrate.mininet.switches import switch_unavailable

    if why := switch_unavailable(switch):
        pytest.skip(why)
    topo = tmp_path / "t.yaml"
    topo.write_text("sites:\n  - {name: rome, lat_deg: 41.9, lon_deg: 12.5}\n  - {name: paris, lat_deg: 48.86, "
                    "lon_deg: 2.35}\nlinks:\n  - {a: rome, b: paris, bandwidth_gbps: 0.1}\n")
    tcp = tmp_path / "tcp.py"
    tcp.write_text(_TCP)
    tb = [sys.executable, "-m", "testbed"]
    held = subprocess.Popen([*tb, "net", "up", str(topo), "--switch", switch], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        first = held.stdout.readline()
        assert "up in" in first and f"switch {switch}" in first, first
        run_id = first.split()[1]
        st = json.loads(subprocess.run([*tb, "net", "status", "--json"], capture_output=True, text=True,
                                       check=True).stdout)
        mine = [s for s in st if s["run_id"] == run_id]
        assert mine and mine[0]["purpose"] == "net" and mine[0]["switch"] == switch
        daemons = [p for p in psutil.Process().children(recursive=True) if p.name().startswith("ovs")]
        assert bool(daemons) == (switch == "ovs" and not _system_ovs()), daemons  # a private Open vSwitch
        ex = subprocess.run([*tb, "net", "exec", "rome", "--run", run_id, "--", "ip", "-br", "addr"],
                            capture_output=True, text=True, timeout=30)
        assert ex.returncode == 0 and "10.200.0.1/32" in ex.stdout, ex.stderr
        mgmt = mine[0]["sites"]["paris"]["mgmt_addr"]
        out, _ = held.communicate(f"rome ping -c 2 -W 2 paris\npingall\n"
                                  f"paris {sys.executable} {tcp} serve {mgmt} &\n"
                                  f"rome sleep 0.5; {sys.executable} {tcp} send {mgmt}\nexit\n", timeout=60)
    finally:
        if held.poll() is None:
            held.kill()  # our own child, by PID
            held.wait()
    assert held.returncode == 0, out
    assert "2 packets transmitted, 2 received" in out  # 'paris' stood for its site address
    assert "0% dropped (2/2 received)" in out and f"network {run_id} down" in out
    assert "management tcp ok" in out, out
    assert _root_links_of(run_id) == []
    if daemons:  # the private Open vSwitch ended, and its userspace datapath's device with it
        assert not [p for p in daemons if p.is_running()] and "ovs-netdev" not in _root_links_of("")
    from testbed.netem.owned import state

    assert state.read(run_id) is None
    assert not [p for p in psutil.process_iter(["cmdline"]) if run_id in " ".join(p.info["cmdline"] or [])]


def _system_ovs() -> bool:
    from testbed.substrate.mininet.ovs import system_ovs_answers

    return system_ovs_answers()


def test_net_up_with_an_unavailable_switch_says_why_in_one_line():
    import subprocess
    import sys

    from testbed.substrate.mininet.switches import switch_unavailable

    why = switch_unavailable("ovs")
    if why is None:
        pytest.skip("Open vSwitch is available here: nothing to refuse")
    r = subprocess.run([sys.executable, "-m", "testbed", "net", "up", "topologies/eu-5.yaml", "--switch", "ovs"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and r.stderr.strip().splitlines() == [f"error: {why}"]


@pytest.mark.parametrize("queue", ["fair", "fifo"])
def test_the_link_queue_is_fair_as_on_netns_unless_the_link_says_fifo(queue):
    """TCLink builds the tbf; the fabric puts the link's fair queue under it, as the netns fabric does,
    and says which queue each link holds (``link_queues`` in the manifest's substrate)."""
    from mininet.log import setLogLevel

    from testbed.substrate.mininet.fabric import MininetFabric

    setLogLevel("error")
    plan = plan_fabric(new_run_id(), ["a", "b"], [LinkInput("a", "b", 100, 100, delay_ms=5, queue=queue)], "relay")
    with MininetFabric(plan) as fab:
        assert_link_queue(fab, queue)
        assert fab.describe()["link_queues"] == {"a-b": queue}
        g = goodput_mbit(fab.site_ns("a"), fab.site_ns("b"), fab.site_addr("b"), 15_000_000)
        assert 0.85 * 100 <= g <= 103  # the rate is the tbf's, fair queue or not (slow start counted)
