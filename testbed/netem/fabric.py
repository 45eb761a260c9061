"""Build and tear down a fabric plan with pyroute2: namespaces, veths, addresses, routes,
shaping, delay relays and the management network.

``with Fabric(plan) as fab: ...`` owns every resource: teardown runs on normal exit, on
exceptions, on Ctrl-C (KeyboardInterrupt) and — through the CLI's SIGTERM handler — on
termination. What a crash still leaves behind is listed in the run's state file
(``/run/testbed/<run>.json``) and removed by ``testbed clean``.
"""

from __future__ import annotations

import os
import secrets
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

from testbed.errors import TestbedError
from testbed.lifecycle import critical
from testbed.netem import fairq, tcp_cc
from testbed.netem.owned import state
from testbed.netem.nsmake import create_netns, remove_netns
from testbed.netem.nsexec import in_netns, ipr_in, terminate
from testbed.netem.plan import MGMT_PREFIX, FabricPlan, LinkPlan
from testbed.netem.routes import aggregate as aggregate_routes
from testbed.netem.qdisc import NetemParams, add_shaping, change_rate, netem_params, tbf_handle, tbf_params

RELAY_READY_TIMEOUT_S = 10.0
LOOPBACK_IFINDEX = 1  # the kernel gives lo index 1 in every network namespace (LOOPBACK_IFINDEX)
TCP_BUF_MAX_BYTES = 256 << 20


class FabricError(TestbedError):
    """The fabric could not be built (missing privilege or kernel feature, name clash...)."""

    exit_code = 3


RELAY_GSO_ABOVE_MBIT = 400.0


def relay_gso(link: LinkPlan) -> bool:
    """The relay's GSO mode (super-frames: ~3x the throughput of frame mode, but delay applies per
    super-frame, measured 88.7 % instead of 95.6 % of a 100 Mbit/s tbf) only where frame mode
    cannot keep up (> 400 Mbit/s), at the link's first rates or at any rate a replay will set
    (``peak_mbit``): a link built in frame mode at 392 Mbit/s whose trace rose to 478 stalled for
    tens of seconds under heavy cross-traffic. With loss or jitter only for the compiled relay, which cuts a
    TCP or UDP super-frame (IPv4 or IPv6) into its segments and draws loss and delay for each (the
    Python relay cannot: it would drop or delay whole super-frames)."""
    from testbed.netem.relay import fastrelay

    if max(link.rate_ab_mbit, link.rate_ba_mbit, link.peak_mbit) <= RELAY_GSO_ABOVE_MBIT:
        return False  # every rate the link will carry (a replay's too) fits frame mode
    return link.loss_pct == 0 or fastrelay.available()


def mtu_frames(link: LinkPlan) -> bool:
    """Every frame on the link is MTU-sized: a frame-mode relay's link, whose offloads are switched
    off (:meth:`Fabric._prepare_relay_links`); its tbf may take a small burst and cut GSO packets into
    frames as it queues them (:func:`testbed.netem.qdisc.tbf_params`)."""
    return link.relay_ns is not None and not relay_gso(link)


def require_root(what: str) -> None:
    if os.geteuid() != 0:
        raise FabricError(f"{what} needs root (network namespaces, veth, tc); run it as root or with sudo")


def _sysctl(ns: str, key: str, value: str) -> None:
    with in_netns(ns):
        Path("/proc/sys", *key.split(".")).write_text(value)


class Fabric:
    def __init__(self, plan: FabricPlan, *, purpose: str = "run", detached: bool = False):
        self.plan = plan
        self.purpose = purpose
        self.detached = detached  # relays survive this process (testbed net up)
        self._namespaces: list[str] = []
        self._relays: dict = {}  # link key -> psutil.Process of its relay (our child)
        self._xt: list = []  # (psutil.Process, stats path, role, XtPlan | site) of the cross-traffic generators
        # named now, created (after it is recorded) by up()
        self._tmp = os.path.join(tempfile.gettempdir(), f"tb-{plan.run_id}-{secrets.token_hex(4)}")
        self._rtt_ms = {link.key: link.rtt_ms for link in plan.links}
        self._index: dict[tuple[str, str], int] = {}  # (namespace, ifname) -> ifindex
        self._fresh_ifs: set[str] = set()  # interfaces this fabric created (they carry no address yet)
        self._up_ifs: set[str] = set()  # ... of which these were created up
        self._ifindex_cache: dict[str, dict[str, int]] = {}  # namespace -> {ifname: ifindex}
        self.up_s: float | None = None
        self._iprs: dict = {}  # namespace -> IPRoute kept open for rate changes
        self._held_burst: dict[tuple[str, int], int] = {}  # (namespace, ifindex) -> the burst its tbf holds
        self._ipr_lock = threading.Lock()

    # -- lifecycle ---------------------------------------------------------------------------
    def __enter__(self) -> "Fabric":
        self.up()
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()

    def up(self) -> None:
        """Every resource is listed in the run's state file before it is made; an interrupt or error
        part-way removes what was made (and :meth:`down` can run again)."""
        require_root("network emulation")
        t0 = time.perf_counter()
        self._relay_processes()  # a bad TESTBED_RELAY_PROCS is refused before anything is made
        if why := tcp_cc.problem(self.plan.tcp_congestion):
            raise FabricError(f"tcp_congestion: {why}")
        self._refuse_clash()  # before anything is listed: down() removes every namespace the plan names
        try:
            with critical():
                state.add(self.plan.run_id, purpose=self.purpose, info=self._info(), **self._recorded())
                os.mkdir(self._tmp, 0o700)
            self._build()
        except BaseException:
            self.down()
            raise
        self.up_s = time.perf_counter() - t0

    def describe(self) -> dict:
        """What the run's manifest says of this fabric beyond the plan (a subclass adds its own)."""
        return {}

    def down(self) -> None:
        """Idempotent, and not cut short by Ctrl-C/SIGTERM (deferred until it is done): stop relays
        (by PID, ours), remove every namespace of the plan that exists, the temp folder, and what the
        state file lists for us."""
        with critical():
            recorded = self._recorded()
            self.release_netlink()
            # the cross-traffic senders first: each writes its last counters on SIGTERM, before a sink's
            # end resets its flows (an error that is not the run's)
            terminate([x[0] for x in self._xt if x[2] == "send"], timeout_s=3)
            terminate([x[0] for x in self._xt if x[2] != "send"] + self._relay_procs(), timeout_s=3)
            self._relays.clear()
            self._xt_final = self.cross_traffic_stats()  # the generators' last counters (they write them on SIGTERM)
            self._xt.clear()
            failed = []
            try:
                self._stop_hosts()
            except Exception as e:  # noqa: BLE001 (reported; the rest of the teardown still runs)
                failed.append(f"hosts: {e}")
            for ns in reversed(self.plan.namespaces()):
                try:
                    remove_netns(ns)
                except OSError as e:
                    failed.append(f"{ns}: {e}")
            self._namespaces.clear()
            shutil.rmtree(self._tmp, ignore_errors=True)
            try:
                tcp_cc.release(self.plan.run_id)  # the namespaces that needed it are gone
            except OSError as e:
                failed.append(f"tcp_allowed_congestion_control: {e}")
            if not failed and not os.path.lexists(self._tmp):
                state.discard(self.plan.run_id, **recorded)
            else:
                print(f"warning: run {self.plan.run_id}: could not remove {'; '.join(failed) or self._tmp}; "
                      f"`testbed clean --run {self.plan.run_id}` retries", file=sys.stderr)

    def _recorded(self) -> dict:
        """What this fabric lists in the state file (its relays' PIDs are added as they start)."""
        return {"namespaces": self.plan.namespaces(), "interfaces": self._root_interfaces(),
                "pids": self._owned_pids(), "tmp_dirs": [self._tmp]}

    def _stop_hosts(self) -> None:
        """End processes that hold the plan's namespaces (Mininet hosts); named namespaces need none."""

    def _root_interfaces(self) -> list[str]:
        """Interfaces made in the root namespace (none: veths are created inside the namespaces)."""
        return []

    def _info(self) -> dict:
        return {"sites": {s.name: {"ns": s.ns, "addr": s.addr, "mgmt_addr": s.mgmt_addr} for s in self.plan.sites},
                "links": [{"key": lk.key, "rate_ab_mbit": lk.rate_ab_mbit, "rate_ba_mbit": lk.rate_ba_mbit,
                           "delay_ms": lk.delay_ms, "jitter_ms": lk.jitter_ms, "loss_pct": lk.loss_pct,
                           "relay_ns": lk.relay_ns} for lk in self.plan.links],
                "impairment": self.plan.impairment, "tcp_congestion": self.plan.tcp_congestion,
                "cross_traffic": [{"src": x.src, "dst": x.dst, "what": x.summary} for x in self.plan.cross_traffic]}

    def _relay_procs(self) -> list:
        """Each relay process once (a compiled relay serves several links)."""
        return list({id(p): p for p in self._relays.values()}.values())

    def _owned_pids(self) -> list[int]:
        return [p.pid for p in self._relay_procs()] + [x[0].pid for x in self._xt]

    # -- build ----------------------------------------------------------------------------------
    def _refuse_clash(self) -> None:
        from pyroute2 import netns

        existing = set(netns.listnetns())
        clash = [ns for ns in self.plan.namespaces() if ns in existing]
        if clash:
            raise FabricError(f"namespace {clash[0]} already exists (run id clash; try again)")

    def _build(self) -> None:
        from pyroute2 import IPRoute

        for ns in self.plan.namespaces():
            with critical():  # listed in the state file already; made whole or not at all
                create_netns(ns)
                self._namespaces.append(ns)
        with IPRoute() as ipr:
            self._veths(ipr)
        self._configure_namespaces()
        self._start_relays()
        self._start_cross_traffic()

    def _veths(self, ipr) -> None:
        p = self.plan

        def veth(a_if: str, a_ns: str, b_if: str, b_ns: str) -> None:
            # the first end is born up (pyroute2 cannot set the peer's flags): one call less later
            ipr.link("add", ifname=a_if, kind="veth", net_ns_fd=a_ns, state="up",
                     peer={"ifname": b_if, "net_ns_fd": b_ns})
            self._fresh_ifs.update((a_if, b_if))  # made here: no address to flush
            self._up_ifs.add(a_if)

        for s in p.sites:
            veth(s.mgmt_if, s.ns, s.mgmt_peer_if, p.mgmt_ns)
        veth(p.ctl_if, p.ctl_ns, p.ctl_peer_if, p.mgmt_ns)
        site_ns = {s.name: s.ns for s in p.sites}
        for link in p.links:
            if link.relay_ns:  # relay ends first: the relay namespace needs no further call for them
                veth(link.if_ra, link.relay_ns, link.if_a, site_ns[link.a])
                veth(link.if_rb, link.relay_ns, link.if_b, site_ns[link.b])
            else:
                veth(link.if_a, site_ns[link.a], link.if_b, site_ns[link.b])

    def _ns(self, name: str) -> str:
        """What to open for a plan namespace: its name here; a /proc path for Mininet hosts."""
        return name

    def _mgmt_switch(self) -> None:
        """A Linux bridge in the management namespace joins the sites and the controller."""

        p = self.plan
        with ipr_in(self._ns(p.mgmt_ns)) as n:
            self._lo_up(n)
            n.link("add", ifname=p.mgmt_bridge, kind="bridge")
            br = n.link_lookup(ifname=p.mgmt_bridge)[0]
            n.link("set", index=br, state="up")
            self._attach_mgmt_ports(n, br)

    def _attach_mgmt_ports(self, n, br: int) -> None:
        """Enslave every site's and the controller's management port to the bridge ``br`` (``n`` is
        bound to the management namespace); shared by the netns and Mininet fabrics."""
        p = self.plan
        for ifname in [s.mgmt_peer_if for s in p.sites] + [p.ctl_peer_if]:
            n.link("set", index=self._ifindex(n, p.mgmt_ns, ifname), master=br, state="up")

    def _shape(self, n, index: int, link: LinkPlan, side: str) -> list[str]:
        """Install the sender-side shaping of one WAN interface (the tbf); returns the ``tc -batch``
        lines of the link's fair queue under it (none for ``queue: fifo``), installed per namespace."""
        end = link.end(side)
        tbf = tbf_params(end.rate_mbit, link.rtt_ms, mtu_frames=mtu_frames(link))
        netem = self._netem(link)
        add_shaping(n, index, tbf, netem)
        if link.queue != "fair":
            self._hold_burst(end, index, tbf)
            return []
        return self._fair_queue_lines(end, index, tbf, tbf_handle(netem is not None)[0])

    def _hold_burst(self, end, index: int, tbf) -> None:
        """Keep the burst of the tbf this fabric installed on ``end``'s interface: a rate change sets
        it again without reading the qdisc back."""
        self._held_burst[(self.plan.site(end.site).ns, index)] = tbf.burst_bytes

    def _fair_queue_lines(self, end, index: int, tbf, tbf_handle_major: str) -> list[str]:
        """The ``tc -batch`` lines of a link's fair queue under the tbf (``tbf``: its parameters, its
        handle's major ``tbf_handle_major``) on ``end``'s interface; holds the tbf's burst. Shared by
        the netns and Mininet fabrics."""
        self._hold_burst(end, index, tbf)
        return fairq.batch(end.ifname, f"{tbf_handle_major}1", tbf.limit_bytes - tbf.burst_bytes)

    def _configure_namespaces(self) -> None:

        p = self.plan
        by_ns: dict[str, list] = {}
        for link in p.links:
            by_ns.setdefault(p.site(link.a).ns, []).append(("a", link))
            by_ns.setdefault(p.site(link.b).ns, []).append(("b", link))
        self._mgmt_switch()
        with ipr_in(self._ns(p.ctl_ns)) as n:
            self._lo_up(n)
            self._addr_up(n, p.ctl_ns, p.ctl_if, p.ctl_addr, MGMT_PREFIX)
        cc = p.tcp_congestion
        tcp_cc.acquire(p.run_id, cc)  # a namespace may default only to what the machine allows
        for s in p.sites:
            if cc != tcp_cc.HOST:
                _sysctl(self._ns(s.ns), "net.ipv4.tcp_congestion_control", cc)
            _sysctl(self._ns(s.ns), "net.ipv4.ip_forward", "1")
            _sysctl(self._ns(s.ns), "net.ipv4.conf.all.rp_filter", "0")
            # let one TCP flow fill a long fat pipe (a new namespace caps buffers at 16 MiB)
            _sysctl(self._ns(s.ns), "net.ipv4.tcp_rmem", f"4096 131072 {TCP_BUF_MAX_BYTES}")
            _sysctl(self._ns(s.ns), "net.ipv4.tcp_wmem", f"4096 65536 {TCP_BUF_MAX_BYTES}")
            # full GSO packets from a flow's first window: two small ones empty its fair-queue bucket between turns
            _sysctl(self._ns(s.ns), "net.ipv4.tcp_min_tso_segs", str(fairq.MIN_TSO_SEGS))
            with ipr_in(self._ns(s.ns)) as n:
                lo = self._lo_up(n)
                n.addr("add", index=lo, address=s.addr, prefixlen=32)
                self._addr_up(n, s.ns, s.mgmt_if, s.mgmt_addr, MGMT_PREFIX)
                fair_queues: list[str] = []
                for side, link in by_ns.get(s.ns, []):
                    end = link.end(side)
                    idx = self._addr_up(n, s.ns, end.ifname, end.addr, 30)
                    fair_queues += self._shape(n, idx, link, side)
                if fair_queues:
                    try:
                        fairq.install(self._ns(s.ns), fair_queues)
                    except fairq.FairQueueError as e:
                        raise FabricError(f"site {s.name}: {e}") from None
                for dst, via, ifname in aggregate_routes(p.routes[s.name], s.addr):  # same forwarding, ~10x fewer
                    n.route("add", dst=dst, gateway=via, oif=self._index[(s.ns, ifname)], prefsrc=s.addr)
        if p.impairment == "relay":
            self._prepare_relay_links()

    def _netem(self, link: LinkPlan) -> NetemParams | None:
        if self.plan.impairment != "netem" or not link.impaired:
            return None
        rate = max(link.rate_ab_mbit, link.rate_ba_mbit)
        return netem_params(link.delay_ms, link.jitter_ms, link.loss_pct, rate)

    @staticmethod
    def _lo_up(n) -> int:
        n.link("set", index=LOOPBACK_IFINDEX, state="up")
        return LOOPBACK_IFINDEX

    def _ifindex(self, n, ns: str, ifname: str) -> int:
        """Index of ``ifname`` in ``ns`` (``n`` is bound there): one dump per namespace, not one
        lookup per interface (the agg namespace of us-100 has 100 WAN interfaces)."""
        known = self._ifindex_cache.get(ns)
        if known is None or ifname not in known:
            known = self._ifindex_cache[ns] = {lk.get_attr("IFLA_IFNAME"): lk["index"] for lk in n.get_links()}
        if ifname not in known:
            raise FabricError(f"interface {ifname} not found in namespace {ns}")
        return known[ifname]

    def _addr_up(self, n, ns: str, ifname: str, addr: str, prefix: int) -> int:
        idx = self._ifindex(n, ns, ifname)
        if ifname not in self._fresh_ifs:  # someone else's interface (a Mininet link): start clean
            n.flush_addr(index=idx)
        n.addr("add", index=idx, address=addr, prefixlen=prefix)
        if ifname not in self._up_ifs:
            n.link("set", index=idx, state="up")
        self._index[(ns, ifname)] = idx
        return idx

    def _prepare_relay_links(self) -> None:
        """Relay interfaces up. Frame-mode relays (links with loss) also need offloads off on all
        four interfaces: frames must be MTU-sized with full checksums (testbed/netem/offload.py).
        GSO-mode relays carry offload metadata (PACKET_VNET_HDR) and leave offloads on."""
        from testbed.netem import bigtcp
        from testbed.netem.relay import fastrelay
        from testbed.netem.offload import set_offloads

        p = self.plan
        big_tcp = None
        # no BIG TCP where cross-traffic runs: its super-frames starve a flow that joins long-lived ones
        # (measured: a 4th cubic flow got 0.005 of a 1 Gbit/s 20 ms link beside 3 generated ones; 0.29-0.35
        # without BIG TCP, 0.21-0.32 in frame mode; docs/how-to/cross-traffic.md)
        xt_pairs = {frozenset((x.src, x.dst)) for x in p.cross_traffic}
        for link in p.links:
            if not link.relay_ns:
                continue
            ends = ((p.site(link.a).ns, link.if_a), (p.site(link.b).ns, link.if_b),
                    (link.relay_ns, link.if_ra), (link.relay_ns, link.if_rb))
            if not relay_gso(link):
                for ns, ifname in ends:
                    with in_netns(self._ns(ns)):
                        set_offloads(ifname, enabled=False)
            else:
                # the compiled relay carries IPv4 BIG TCP super-frames (testbed/netem/bigtcp.py):
                # fewer, larger frames per byte, measured ~1.5x the goodput at 10 Gbit/s here
                if big_tcp is None:
                    big_tcp = fastrelay.available() and bigtcp.supported()
                if big_tcp and frozenset((link.a, link.b)) not in xt_pairs:
                    for ns, ifname in ends:
                        with in_netns(self._ns(ns)):
                            try:
                                bigtcp.set_sizes(ifname, bigtcp.RELAY_BIG_TCP_BYTES)
                            except bigtcp.BigTcpError as e:
                                raise FabricError(f"delay relay link {link.key}: {e}") from None
            with ipr_in(self._ns(link.relay_ns)) as n:
                self._lo_up(n)
                for ifname in (link.if_ra, link.if_rb):
                    if ifname not in self._up_ifs:  # created up by _veths; not so under Mininet
                        n.link("set", index=self._ifindex(n, link.relay_ns, ifname), state="up")

    def _start_relays(self) -> None:
        """Start one delay relay per relayed link, all at once (forked from one process that imported
        the relay once: :mod:`testbed.netem.relay.relayfork`), then wait until every one is ready."""
        links = [link for link in self.plan.links if link.relay_ns]
        if not links:
            return
        import psutil

        from testbed.netem.relay.relay import PathImpairment, relay_argv
        from testbed.netem.relay.relayfork import RelaySpec, RelayStartError, start_relays

        tmp = Path(self._tmp)
        from testbed.netem.relay import fastrelay

        if fastrelay.available():
            return self._start_fast_relays(links)
        specs = []
        for link in links:
            imp = PathImpairment(delay_ms=link.delay_ms, jitter_ms=link.jitter_ms, loss_pct=link.loss_pct)
            argv = relay_argv(link.if_ra, link.if_rb, imp, imp, seed=link.index, gso=relay_gso(link),
                              stats_path=str(tmp / f"relay-{link.index}.json"),
                              ready_file=str(tmp / f"relay-{link.index}.ready"), netns=self._ns(link.relay_ns),
                              control_path=self.relay_control_path(link))
            specs.append(RelaySpec(args=argv[3:], log_path=str(tmp / f"relay-{link.index}.log")))
        started: list[int] = []

        def keep(pid: int) -> None:
            self._relays[links[len(started)].key] = psutil.Process(pid)
            started.append(pid)

        with critical():  # started and recorded (state file and self._relays) as one step
            try:
                # own sessions: a terminal's Ctrl-C goes to testbed, which stops the relays in order;
                # the temp folder's name (it holds the run id) is in every relay's command line
                start_relays(specs, self._tmp, on_pid=keep)
            except RelayStartError as e:
                raise FabricError(f"delay relays: {e}") from None
            finally:  # one state-file write for all of them (one per relay costs ~1 s for us-100)
                if started:
                    state.add(self.plan.run_id, pids=started)
        self._wait_relays_ready(links)

    def _start_fast_relays(self, links: list) -> None:
        """The compiled relay (:mod:`testbed.netem.relay.fastrelay`): a few processes (one per CPU by
        default, :mod:`testbed.netem.relay.relaypool`), each serving its share of the links in their own
        namespaces from one event loop. Each link keeps its own stats and control file; a live change
        signals the link's process, which re-reads the control files that changed."""
        import psutil

        from testbed.netem.relay import fastrelay
        from testbed.netem.relay.relaypool import group_links

        tmp = Path(self._tmp)
        n_procs = self._relay_processes()
        groups = group_links([max(lk.rate_ab_mbit, lk.rate_ba_mbit) for lk in links], n_procs)
        started: list[int] = []
        with critical():
            try:
                for g, members in enumerate(groups):
                    args = []
                    for link in (links[i] for i in members):
                        d, j, l = link.delay_ms, link.jitter_ms, link.loss_pct
                        args.append(fastrelay.LinkArg(link.if_ra, link.if_rb, d, j, l, d, j, l, seed=link.index,
                                                      gso=relay_gso(link),
                                                      stats_path=str(tmp / f"relay-{link.index}.json"),
                                                      control_path=self.relay_control_path(link),
                                                      netns=self._ns(link.relay_ns)))
                    argv = fastrelay.fastrelay_argv(args, ready_file=str(tmp / f"relay-p{g}.ready"))
                    pid = fastrelay.spawn(argv, str(tmp / f"relay-p{g}.log"))
                    started.append(pid)
                    proc = psutil.Process(pid)
                    for i in members:
                        self._relays[links[i].key] = proc
            except OSError as e:
                raise FabricError(f"delay relays: cannot start {fastrelay.BINARY}: {e.strerror or e}") from None
            finally:
                if started:
                    state.add(self.plan.run_id, pids=started)
        self._wait_ready([(self._relays[links[members[0]].key], tmp / f"relay-p{g}.ready", tmp / f"relay-p{g}.log",
                           f"{len(members)} link(s), first {links[members[0]].key}")
                          for g, members in enumerate(groups)])

    def _relay_processes(self) -> int:
        """How many compiled relay processes serve the plan's relayed links (:mod:`testbed.netem.relay.relaypool`)."""
        from testbed.netem.relay.relaypool import RelayPoolError, process_count, rt_priority

        try:
            rt_priority()  # a bad TESTBED_RELAY_RT_PRIO is refused here too, before anything is made
            return process_count(sum(1 for link in self.plan.links if link.relay_ns))
        except RelayPoolError as e:
            raise FabricError(str(e)) from None

    def _wait_relays_ready(self, links: list) -> None:
        """One Python relay per link: wait for each link's ready file."""
        tmp = Path(self._tmp)
        self._wait_ready([(self._relays[link.key], tmp / f"relay-{link.index}.ready", tmp / f"relay-{link.index}.log",
                           link.key) for link in links])

    def _wait_ready(self, pending: list) -> None:
        """Wait until every ``(process, ready file, log, what it serves)`` has written its ready file."""
        from testbed.processes import ended

        deadline = time.monotonic() + RELAY_READY_TIMEOUT_S
        while pending:
            pending = [p for p in pending if not p[1].exists()]
            for proc, _, log, what in pending:
                if ended(proc):
                    raise FabricError(f"delay relay for {what} exited with {proc.returncode} (log: {log})")
            if pending and time.monotonic() > deadline:
                raise FabricError(f"{len(pending)} delay relay(s) not ready after {RELAY_READY_TIMEOUT_S} s "
                                  f"(first: {pending[0][3]})")
            if pending:
                time.sleep(0.01)

    def _start_cross_traffic(self) -> None:
        """The plan's cross-traffic (:mod:`testbed.netem.crosstraffic`): a sink in each receiving
        site's namespace, then one sender per entry in its source site's; each recorded in the state
        file as it starts and owned by this fabric (stopped by :meth:`down`)."""
        xts = self.plan.cross_traffic
        if not xts:
            return
        import psutil

        from testbed.netem.crosstraffic import gen_argv, sender_spec
        from testbed.netem.relay.fastrelay import spawn

        tmp = Path(self._tmp)

        def start(role: str, ns: str, name: str, what, spec: str | None = None) -> tuple:
            stats, ready, log = (str(tmp / f"xt-{name}.{ext}") for ext in ("json", "ready", "log"))
            with critical():  # started and recorded as one step
                try:
                    pid = spawn(gen_argv(role, self._ns(ns), stats, ready, spec=spec), log)
                except OSError as e:
                    raise FabricError(f"cross-traffic {role} {name}: cannot start: {e.strerror or e}") from None
                proc = psutil.Process(pid)
                self._xt.append((proc, stats, role, what))
                state.add(self.plan.run_id, pids=[pid])
            return proc, Path(ready), Path(log), f"cross-traffic {role} {name}"

        sinks = sorted({x.dst for x in xts})
        self._wait_ready([start("sink", self.plan.site(s).ns, f"sink-{s}", s) for s in sinks])
        self._wait_ready([start("send", self.plan.site(x.src).ns, f"send-{x.index}", x,
                                spec=sender_spec(x, self.plan.site(x.dst).addr, self.plan.tcp_congestion,
                                                 self.cross_traffic_clock_path()))
                          for x in xts])

    def cross_traffic_clock_path(self) -> str:
        """The file an emulated run writes its scenario time to for the generators' schedules
        (:func:`testbed.netem.crosstraffic.write_clock`); absent: they keep their own clock."""
        return os.path.join(self._tmp, "xt-clock.json")

    def cross_traffic_stats(self) -> list[dict]:
        """The cross-traffic generators' counters now (after :meth:`down`: their last ones): one dict
        per sender (``src``, ``dst``, ``index``, ``tcp_bytes``, ``udp_bytes``, ``flows``, ...) and per
        sink (``site``, bytes received)."""
        from testbed.netem.crosstraffic import read_stats

        if not self._xt:
            return list(getattr(self, "_xt_final", []))
        out = []
        for _, path, role, what in self._xt:
            d = read_stats(path) or {}
            if role == "send":
                d.update(role="send", index=what.index, src=what.src, dst=what.dst)
            else:
                d.update(role="sink", site=what)
            out.append(d)
        return out

    # -- at run time ---------------------------------------------------------------------------
    def set_rate(self, src: str, dst: str, rate_mbit: float) -> float:
        """Change the src->dst bandwidth in place; returns the netlink call's duration (s).
        Netlink sockets are kept open per namespace (a rate change must land within milliseconds)."""
        from pyroute2 import IPRoute

        link = self.plan.link(src, dst)
        end = link.end_at(src)
        ns = self.plan.site(end.site).ns
        idx = self._index[(ns, end.ifname)]
        handle, parent = self._tbf_handle(link)
        with self._ipr_lock:
            ipr = self._iprs.get(ns)
            if ipr is None:
                with in_netns(self._ns(ns)):
                    ipr = self._iprs[ns] = IPRoute()
            took, applied = change_rate(ipr, idx, tbf_params(rate_mbit, self._rtt_ms[link.key], mtu_frames=mtu_frames(link)),
                                        handle=handle, parent=parent, held_burst_bytes=self._held_burst.get((ns, idx)))
            if (ns, idx) in self._held_burst:  # a tbf this fabric installed: it alone changes it
                self._held_burst[(ns, idx)] = applied.burst_bytes
            return took

    def release_netlink(self) -> None:
        """Close the sockets :meth:`set_rate` keeps open. pyroute2 binds each to the thread that
        opened it, so the thread that changed rates calls this when it is done."""
        with self._ipr_lock:
            for ipr in self._iprs.values():
                ipr.close()
            self._iprs.clear()

    def _tbf_handle(self, link: LinkPlan) -> tuple[str, str | None]:
        return tbf_handle(self._netem(link) is not None)

    def relay_control_path(self, link: LinkPlan) -> str:
        """The JSON file the link's relay reads new impairments from on SIGUSR1 (testbed.netem.live)."""
        return os.path.join(self._tmp, f"relay-{link.index}.control.json")

    def relay_pids(self) -> dict[str, int]:
        return {k: p.pid for k, p in self._relays.items()}

    def site_ns(self, site: str) -> str:
        """Name or path to enter the site's namespace (``testbed.netem.nsexec.in_netns``)."""
        return self._ns(self.plan.site(site).ns)

    def site_addr(self, site: str) -> str:
        return self.plan.site(site).addr
