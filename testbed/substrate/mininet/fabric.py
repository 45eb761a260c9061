"""The same fabric plan built with Mininet: hosts, a Linux-bridge management switch, TCLink WAN links.

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

import warnings
from contextlib import contextmanager

from testbed.netem.fabric import Fabric, FabricError
from testbed.netem.nsexec import ipr_in
from testbed.netem.plan import LinkPlan
from testbed.netem.qdisc import read_tbf_rate_mbit, tbf_params

TBF_HANDLE = "5:"


@contextmanager
def _quiet_mininet():
    """Mininet 2.3 logs through the deprecated ``Logger.warn``; keep that out of our warnings."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The 'warn' method is deprecated", category=DeprecationWarning)
        yield


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
        super().__init__(plan, **kw)
        if switch != "lxbr":
            raise FabricError(f"switch {switch!r}: only 'lxbr' is supported (OVS needs its kernel datapath; "
                              "see `testbed doctor`)")
        self.net = None
        self._paths: dict[str, str] = {}
        self._host_pids: list[int] = []

    def _owned_pids(self) -> list[int]:
        return super()._owned_pids() + self._host_pids

    def _ns(self, name: str) -> str:
        return self._paths[name]

    def _build(self) -> None:
        with _quiet_mininet():
            self._build_net()

    def _build_net(self) -> None:
        from mininet.link import Link
        from mininet.net import Mininet
        from mininet.nodelib import LinuxBridge

        p = self.plan
        net = Mininet(topo=None, build=False, controller=None, switch=LinuxBridge, autoSetMacs=False,
                      autoStaticArp=False, waitConnected=False)
        self.net = net
        hosts = {}
        for i, ns in enumerate([s.ns for s in p.sites] + [lk.relay_ns for lk in p.links if lk.relay_ns] + [p.ctl_ns]):
            hosts[ns] = net.addHost(f"tb{p.run_id}h{i}", ip=None)  # the run id is in the host's command line
        switch = net.addSwitch(p.mgmt_bridge, cls=LinuxBridge, dpid="1")
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
        from testbed.netem import state

        state.add(p.run_id, pids=self._host_pids)  # Mininet starts them itself: listed right after
        self._configure_namespaces()
        self._verify()
        self._start_relays()

    def _link_params(self, link: LinkPlan, side: str) -> dict:
        params: dict = {"bw": link.rate_ab_mbit if side == "a" else link.rate_ba_mbit, "rtt_ms": link.rtt_ms}
        if self.plan.impairment == "netem" and link.impaired:
            params.update(delay=f"{link.delay_ms}ms", loss=link.loss_pct or None)
            if link.jitter_ms:
                params["jitter"] = f"{link.jitter_ms}ms"
        return params

    def _mgmt_switch(self) -> None:
        """Mininet's LinuxBridge already joins the management interfaces."""

    def _shape(self, n, index: int, link: LinkPlan, side: str) -> None:
        """TCLink shaped the interface at build time; :meth:`_verify` checks it."""

    def _tbf_handle(self, link: LinkPlan) -> tuple[str, str | None]:
        return TBF_HANDLE, None

    def _verify(self) -> None:

        p = self.plan
        for link in p.links:
            for side, site, ifname, rate in (("a", link.a, link.if_a, link.rate_ab_mbit),
                                             ("b", link.b, link.if_b, link.rate_ba_mbit)):
                ns = p.site(site).ns
                with ipr_in(self._ns(ns)) as n:
                    idx = self._index[(ns, ifname)]
                    got = read_tbf_rate_mbit(n, idx)
                    kinds = {q.get_attr("TCA_KIND") for q in n.get_qdiscs(index=idx)}
                want = tbf_params(rate).rate_mbit
                if got is None or abs(got - want) > 0.01 * want:
                    raise FabricError(f"Mininet did not apply bw={rate:g} Mbit/s on {link.key} ({side}): "
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
        if self.net is not None:
            net, self.net = self.net, None
            with _quiet_mininet():
                net.stop()  # ends the hosts Mininet started and deletes its links and bridge
