"""The same fabric plan built with Mininet: hosts, a management switch, TCLink WAN links.

The management switch (:mod:`.switches`) is Mininet's ``LinuxBridge`` in a namespace of its own,
like the netns fabric's bridge (the controller and every site's node agent talk over it), or an
``OVSBridge``. Mininet's LinuxBridge only enslaves ports whose names contain its own (``s1-eth1``);
ours are named by the plan, so they are attached by the code the netns fabric uses
(:meth:`Fabric._attach_mgmt_ports`) and read back.

Mininet's own behaviours that would silently weaken a scenario are closed off:
- WAN links are Mininet ``Link``s whose interfaces are a ``TCIntf`` subclass (what ``TCLink`` is,
  but with per-direction parameters, which ``TCLink`` cannot take);
- ``bw > 1000`` is ignored by stock ``TCIntf`` (``bwParamMax``): our interface class raises the
  limit to what tbf can hold and shapes with a tbf whose burst is never below 256 KiB (stock
  Mininet uses 15 KB, which can stall a flow after a rate change on this kernel);
- ``delay=`` without netem prints an error and is dropped: we never hand delay to TCLink unless
  the kernel has netem; otherwise the link runs through a relay host with the userspace relay;
- after ``start()`` every WAN interface's qdisc is read back with pyroute2 and the run refuses to
  go on if a rate (or a netem delay) is not what the plan asked for.
Rate changes are ``tc change`` in place through pyroute2, as on the netns substrate.
"""

from __future__ import annotations

import logging
import warnings
from contextlib import contextmanager

from testbed.netem.fabric import Fabric, FabricError
from testbed.netem.nsexec import ipr_in
from testbed.netem.plan import LinkPlan
from testbed.netem.qdisc import read_tbf_rate_mbit, tbf_params
from testbed.substrate.mininet.switches import switch_unavailable

TBF_HANDLE = "5:"


@contextmanager
def _quiet_mininet():
    """Mininet 2.3 logs through the deprecated ``Logger.warn`` (and its OVSSwitch uses distutils'
    deprecated ``StrictVersion``); keep those out of our warnings. Its
    build-time chatter (for example the root namespace's bridge-nf-call-iptables warning, which does
    not concern a bridge in its own namespace) is held back unless the caller asked Mininet for
    more than the default level; errors still print."""
    from mininet.log import lg

    level = lg.getEffectiveLevel()
    lg.setLevel(max(level, logging.ERROR))
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="The 'warn' method is deprecated", category=DeprecationWarning)
            # its OVSSwitch compares Open vSwitch versions with distutils' StrictVersion
            warnings.filterwarnings("ignore", message="distutils Version classes are deprecated",
                                    category=DeprecationWarning)
            yield
    finally:
        lg.setLevel(level)


def _root_link_exists(ifname: str) -> bool:
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        return bool(ipr.link_lookup(ifname=ifname))


def _intf_class():
    from mininet.link import TCIntf

    class TestbedTCIntf(TCIntf):
        bwParamMax = 34_000  # tbf's 32-bit rate field

        def bwCmds(self, bw=None, **kw):  # noqa: N802 (Mininet's name)
            if bw is None:
                return [], " root "
            p = tbf_params(bw, self.params.get("rtt_ms", 0.0))
            cmd = (f"%s qdisc add dev %s root handle {TBF_HANDLE} tbf rate {p.rate_bytes_s * 8}bit "
                   f"burst {p.burst_bytes} limit {p.limit_bytes}")
            return [cmd], f" parent {TBF_HANDLE}1 "

    return TestbedTCIntf


class MininetFabric(Fabric):
    def __init__(self, plan, *, switch: str = "lxbr", **kw):
        why = switch_unavailable(switch)
        if why:
            raise FabricError(why)
        super().__init__(plan, **kw)
        self.switch = switch
        self.net = None
        self.hosts: dict[str, object] = {}  # site name -> Mininet host (for the CLI)
        self._paths: dict[str, str] = {}
        self._host_pids: list[int] = []
        self._ovs = None  # a private Open vSwitch started for this network (switch ovs, none answering)
        self._queues: dict[str, str] = {}  # link key ("a-b") -> the queue its shapers hold (describe)

    def describe(self) -> dict:
        return {"switch": self.switch, "link_queues": dict(sorted(self._queues.items()))}

    def _owned_pids(self) -> list[int]:
        return super()._owned_pids() + self._host_pids + (self._ovs.pids if self._ovs else [])

    def _ns(self, name: str) -> str:
        return self._paths[name]

    def _build(self) -> None:
        with _quiet_mininet():
            self._build_net()

    def _build_net(self) -> None:
        from mininet.link import Link
        from mininet.net import Mininet
        from mininet.node import OVSBridge
        from mininet.nodelib import LinuxBridge

        p = self.plan
        if self.switch == "lxbr":
            cls, sw_params = LinuxBridge, {"inNamespace": True}
        else:
            cls, sw_params = OVSBridge, {"datapath": self._open_vswitch()}
        net = Mininet(topo=None, build=False, controller=None, switch=cls, autoSetMacs=False,
                      autoStaticArp=False, waitConnected=False)
        self.net = net
        hosts = {}
        for i, ns in enumerate([s.ns for s in p.sites] + [lk.relay_ns for lk in p.links if lk.relay_ns] + [p.ctl_ns]):
            hosts[ns] = net.addHost(f"tb{p.run_id}h{i}", ip=None)  # the run id is in the host's command line
        self.hosts = {s.name: hosts[s.ns] for s in p.sites}
        # the switch's name is its bridge's; a namespaced LinuxBridge's shell holds the plan's mgmt namespace
        switch = net.addSwitch(p.mgmt_bridge, cls=cls, dpid="1", **sw_params)
        for s in p.sites:
            net.addLink(hosts[s.ns], switch, intfName1=s.mgmt_if, intfName2=s.mgmt_peer_if, cls=Link)
        net.addLink(hosts[p.ctl_ns], switch, intfName1=p.ctl_if, intfName2=p.ctl_peer_if, cls=Link)
        intf = _intf_class()
        for link in p.links:
            ha, hb = hosts[p.site(link.a).ns], hosts[p.site(link.b).ns]
            pa, pb = self._link_params(link, "a"), self._link_params(link, "b")
            if link.relay_ns:
                r = hosts[link.relay_ns]
                net.addLink(ha, r, intfName1=link.if_a, intfName2=link.if_ra, cls=Link, intf=intf, params1=pa, params2={})
                net.addLink(r, hb, intfName1=link.if_rb, intfName2=link.if_b, cls=Link, intf=intf, params1={}, params2=pb)
            else:
                net.addLink(ha, hb, intfName1=link.if_a, intfName2=link.if_b, cls=Link, intf=intf, params1=pa, params2=pb)
        net.build()
        net.start()
        self._paths = {ns: f"/proc/{h.pid}/ns/net" for ns, h in hosts.items()}
        self._host_pids = [h.pid for h in hosts.values()]
        if switch.inNamespace:
            self._paths[p.mgmt_ns] = f"/proc/{switch.pid}/ns/net"
            self._host_pids.append(switch.pid)
        from testbed.netem.owned import state

        # Mininet starts them itself: listed right after (with the hosts' namespace paths)
        state.add(p.run_id, pids=self._host_pids, info=self._info())
        self._configure_namespaces()
        self._verify()
        self._start_relays()
        self._start_cross_traffic()

    def _open_vswitch(self) -> str:
        """The system's Open vSwitch where it answers, else a private one in this fabric's temporary
        folder (each daemon listed in the state file as it starts); returns Mininet's datapath."""
        from testbed.netem.owned import state
        from testbed.substrate.mininet import ovs

        if not ovs.system_ovs_answers():
            self._ovs = ovs.PrivateOvs(f"{self._tmp}/ovs")
            # its userspace datapath's own device (persistent, not named by the run): removed by
            # ovs-vswitchd with the last bridge, else by the teardown if it was made for this network
            self._ovs.owns_netdev = ovs.datapath() == "user" and not _root_link_exists(ovs.NETDEV_IF)
            if self._ovs.owns_netdev:  # so that `testbed clean` removes it if this process is killed
                state.add(self.plan.run_id, info={"ovs_netdev": ovs.NETDEV_IF})
            self._ovs.start(on_started=lambda pid: state.add(self.plan.run_id, pids=[pid]))
        return ovs.datapath()

    def _link_params(self, link: LinkPlan, side: str) -> dict:
        params: dict = {"bw": link.rate_ab_mbit if side == "a" else link.rate_ba_mbit, "rtt_ms": link.rtt_ms}
        if self.plan.impairment == "netem" and link.impaired:
            params.update(delay=f"{link.delay_ms}ms", loss=link.loss_pct or None)
            if link.jitter_ms:
                params["jitter"] = f"{link.jitter_ms}ms"
        return params

    def _mgmt_switch(self) -> None:
        """Mininet's LinuxBridge made the bridge (in its namespace) but attached none of our ports: attach
        them as the netns fabric does, then read every port's master back. An OVSBridge added its ports."""
        if self.switch != "lxbr":
            self._userspace_ports()
            return
        p = self.plan
        with ipr_in(self._ns(p.mgmt_ns)) as n:
            self._lo_up(n)
            found = n.link_lookup(ifname=p.mgmt_bridge)
            if not found:
                raise FabricError(f"Mininet's LinuxBridge {p.mgmt_bridge} is missing from its namespace")
            br = found[0]
            n.link("set", index=br, state="up")
            self._attach_mgmt_ports(n, br)
            masters = {lk.get_attr("IFLA_IFNAME"): lk.get_attr("IFLA_MASTER") for lk in n.get_links()}
        loose = [i for i in [s.mgmt_peer_if for s in p.sites] + [p.ctl_peer_if] if masters.get(i) != br]
        if loose:
            raise FabricError(f"management port {loose[0]} is not on bridge {p.mgmt_bridge}; refusing to run "
                              "without a management network")

    def _userspace_ports(self) -> None:
        """Open vSwitch's userspace datapath reads and writes frames as a frame relay does (AF_PACKET),
        so, as for a relayed link (testbed/netem/offload.py), offloads are switched off on both ends
        of every management veth: with tx checksumming on, a TCP frame reaches the other side with
        only a partial checksum and is dropped (pings pass; not even a SYN gets through; measured)."""
        from testbed.netem.nsexec import in_netns
        from testbed.netem.offload import set_offloads
        from testbed.substrate.mininet.ovs import datapath

        if datapath() != "user":
            return
        p = self.plan
        ends = [(s.ns, s.mgmt_if, s.mgmt_peer_if) for s in p.sites] + [(p.ctl_ns, p.ctl_if, p.ctl_peer_if)]
        for ns, ifname, peer in ends:
            with in_netns(self._ns(ns)):
                set_offloads(ifname, enabled=False)
            set_offloads(peer, enabled=False)  # the switch's side, in the root namespace

    def _info(self) -> dict:
        """As the netns fabric's, with each site's namespace given as its host's ``/proc/PID/ns/net``
        (``testbed net exec`` enters it while the network is held)."""
        info = super()._info()
        for s in self.plan.sites:
            if s.ns in self._paths:
                info["sites"][s.name]["ns"] = self._paths[s.ns]
        info["switch"] = self.switch
        return info

    def _shape(self, n, index: int, link: LinkPlan, side: str) -> list[str]:
        """TCLink shaped the interface at build time (:meth:`_verify` checks it); returns the ``tc -batch``
        lines of the link's fair queue under its tbf, as the netns fabric's. Where TCLink put netem
        under the tbf (a kernel with netem), netem's queue is the link's and the link keeps it: said in
        :meth:`describe` (``link_queues``)."""
        end = link.end(side)
        tbf = tbf_params(end.rate_mbit, link.rtt_ms)  # what TestbedTCIntf.bwCmds installed
        if link.queue != "fair":
            self._queues[link.key] = "fifo"
        elif self.plan.impairment == "netem" and link.impaired:
            self._queues[link.key] = "fifo (netem under Mininet's tbf holds the queue; no fair queue)"
        elif read_tbf_rate_mbit(n, index) is not None:  # else TCLink applied no tbf, and _verify refuses the link
            self._queues[link.key] = "fair"
            return self._fair_queue_lines(end, index, tbf, TBF_HANDLE)
        self._hold_burst(end, index, tbf)
        return []

    def _tbf_handle(self, link: LinkPlan) -> tuple[str, str | None]:
        return TBF_HANDLE, None

    def _verify(self) -> None:

        p = self.plan
        for link in p.links:
            for end in (link.end("a"), link.end("b")):
                ns = p.site(end.site).ns
                with ipr_in(self._ns(ns)) as n:
                    idx = self._index[(ns, end.ifname)]
                    got = read_tbf_rate_mbit(n, idx)
                    kinds = {q.get_attr("TCA_KIND") for q in n.get_qdiscs(index=idx)}
                want = tbf_params(end.rate_mbit).rate_mbit
                if got is None or abs(got - want) > 0.01 * want:
                    raise FabricError(f"Mininet did not apply bw={end.rate_mbit:g} Mbit/s on {link.key} ({end.side}): "
                                      f"kernel holds {got}; refusing to run with less than the scenario asks")
                if p.impairment == "netem" and link.impaired and "netem" not in kinds:
                    raise FabricError(f"Mininet did not apply delay on {link.key}: no netem qdisc; refusing")

    def _root_interfaces(self) -> list[str]:
        """Mininet makes its veths (and the management bridge) in the root namespace first."""
        p = self.plan
        names = [p.mgmt_bridge, p.ctl_if, p.ctl_peer_if]
        names += [n for s in p.sites for n in (s.mgmt_if, s.mgmt_peer_if)]
        names += [n for lk in p.links for n in (lk.if_a, lk.if_b, lk.if_ra, lk.if_rb) if n]
        return names

    def _stop_hosts(self) -> None:
        """Called by :meth:`Fabric.down` after the relays, before the state file is updated."""
        try:
            if self.net is not None:
                net, self.net = self.net, None
                with _quiet_mininet():
                    net.stop()  # ends the hosts Mininet started and deletes its links and bridge
        finally:
            if self._ovs is not None:  # after Mininet deleted its bridge from the database
                self._ovs.stop()
