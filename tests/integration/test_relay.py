"""Delay relay on a real link: A --veth-- [R: relay] --veth-- B, built with pyroute2 in fresh
namespaces ``tb-<run>-{a,r,b}`` that are removed on every exit path.

Measurements run in this process: sockets are created inside A or B (``in_netns``) and used from
threads. Numbers are printed (``-s`` shows them) and asserted against the project's targets.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import statistics
import struct
import subprocess
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Iterator

import pytest

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: network namespaces, veth and AF_PACKET sockets"),
]

from pyroute2 import IPRoute, netns  # noqa: E402

from testbed.netem.owned.naming import if_name, new_run_id, ns_name  # noqa: E402
from testbed.netem.nsexec import in_netns, spawn  # noqa: E402
from testbed.netem.offload import get_offloads, set_offloads  # noqa: E402
from testbed.netem.relay.relay import PathImpairment, relay_argv, run_relay  # noqa: E402

ADDR_A, ADDR_B, PREFIX = "10.250.0.1", "10.250.0.2", 30
PROBE = struct.Struct("!IQ")  # sequence number, send time (ns)


@dataclass(frozen=True)
class Link:
    ns_a: str
    ns_r: str
    ns_b: str
    if_a: str
    if_ra: str
    if_rb: str
    if_b: str


@contextmanager
def relayed_link(offloads_off: bool = True) -> Iterator[Link]:
    run = new_run_id()
    link = Link(ns_name(run, "a"), ns_name(run, "r"), ns_name(run, "b"),
                if_name(run, "a"), if_name(run, "ra"), if_name(run, "rb"), if_name(run, "b"))
    created: list[str] = []
    try:
        for ns in (link.ns_a, link.ns_r, link.ns_b):
            netns.create(ns)
            created.append(ns)
        with in_netns(link.ns_r), IPRoute() as ip:  # veths born in R: nothing ever sits in the root ns
            for mine, peer, peer_ns in ((link.if_ra, link.if_a, link.ns_a), (link.if_rb, link.if_b, link.ns_b)):
                ip.link("add", ifname=mine, kind="veth", peer=peer)
                ip.link("set", index=ip.link_lookup(ifname=peer)[0], net_ns_fd=peer_ns)
        for ns, ifn, addr in ((link.ns_a, link.if_a, ADDR_A), (link.ns_b, link.if_b, ADDR_B),
                              (link.ns_r, link.if_ra, None), (link.ns_r, link.if_rb, None)):
            with in_netns(ns), IPRoute() as ip:
                idx = ip.link_lookup(ifname=ifn)[0]
                if addr:
                    ip.addr("add", index=idx, address=addr, prefixlen=PREFIX)
                ip.link("set", index=idx, state="up")
                ip.link("set", index=ip.link_lookup(ifname="lo")[0], state="up")
                if offloads_off:
                    set_offloads(ifn, enabled=False)
        yield link
    finally:
        for ns in created:
            netns.remove(ns)


@pytest.fixture
def link() -> Iterator[Link]:
    with relayed_link() as lk:
        yield lk


class Relay:
    """A relay process inside R, owned by PID; stopped with SIGTERM, killed only if it hangs."""

    def __init__(self, link: Link, tmp: Path, ab: PathImpairment, ba: PathImpairment, seed: int,
                 gso: bool = False) -> None:
        self.stats_path, ready = tmp / "relay-stats.json", tmp / "relay-ready"
        self._err = open(tmp / "relay-stderr.txt", "w+")  # noqa: SIM115
        argv = relay_argv(link.if_ra, link.if_rb, ab, ba, seed=seed,
                          stats_path=str(self.stats_path), ready_file=str(ready), gso=gso)
        self.proc = spawn(link.ns_r, argv, stdout=subprocess.DEVNULL, stderr=self._err)
        deadline = time.monotonic() + 10
        while not ready.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"relay not ready (rc={self.proc.returncode}): {self.stderr()}")
            time.sleep(0.01)

    def stderr(self) -> str:
        self._err.seek(0)
        return self._err.read()

    def stop(self) -> float:
        """SIGTERM, wait; returns the seconds it took to exit."""
        t0 = time.monotonic()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._err.close()
        return time.monotonic() - t0

    def stats(self) -> dict:
        return json.loads(self.stats_path.read_text())


@contextmanager
def relay(link: Link, tmp: Path, ab: PathImpairment, ba: PathImpairment | None = None, seed: int = 0,
          gso: bool = False) -> Iterator[Relay]:
    r = Relay(link, tmp, ab, ab if ba is None else ba, seed, gso)
    try:
        yield r
    finally:
        r.stop()


@contextmanager
def udp_echo(ns: str, addr: str) -> Iterator[int]:
    with in_netns(ns):
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((addr, 0))
    sock.settimeout(0.1)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                data, peer = sock.recvfrom(2048)
            except TimeoutError:
                continue
            sock.sendto(data, peer)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield sock.getsockname()[1]
    finally:
        stop.set()
        t.join()
        sock.close()


@dataclass
class Probes:
    sent: int
    rtt_ms: dict[int, float]
    order: list[int]  # sequence numbers in the order replies came back

    @property
    def loss(self) -> float:
        return 1 - len(self.rtt_ms) / self.sent


def udp_probe(link: Link, port: int, n: int, interval_s: float, linger_s: float = 1.0) -> Probes:
    """Send ``n`` numbered probes from A at a fixed pace (pipelined), collect echoes from B."""
    with in_netns(link.ns_a):
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    with sock:
        sock.connect((ADDR_B, port))
        sock.setblocking(False)
        pad = bytes(64 - PROBE.size)
        rtt, order, seq = {}, [], 0
        start = time.monotonic_ns()
        end = start + int((n * interval_s + linger_s) * 1e9)
        while (now := time.monotonic_ns()) < end and len(rtt) < n:
            next_send = start + int(seq * interval_s * 1e9)
            if seq < n and now >= next_send:
                try:
                    sock.send(PROBE.pack(seq, now) + pad)
                except BlockingIOError:  # the send queue is full (the relay is behind): send it once it drains
                    select.select([], [sock], [], 0.001)
                else:
                    seq += 1
                    continue
            wait = (next_send - now) / 1e9 if seq < n else (end - now) / 1e9
            if select.select([sock], [], [], max(wait, 0))[0]:
                while True:
                    try:
                        data = sock.recv(2048)
                    except BlockingIOError:
                        break
                    s, t_sent = PROBE.unpack_from(data)
                    rtt[s] = (time.monotonic_ns() - t_sent) / 1e6
                    order.append(s)
        return Probes(n, rtt, order)


def resolve_neighbours(link: Link, port: int, tries: int = 10) -> None:
    """Probe until one echo comes back, so both ends have resolved each other before a measurement.
    While a neighbour entry resolves, the kernel queues the packets for it and flushes the queue once
    the answer comes, dropping its lock per packet: a packet sent on another CPU meanwhile can
    overtake the queued ones. That reorders the first probes whatever the relay does (echo 11 once
    came back before echo 2), so order checks start after this. On a lossy link the answer itself
    can be lost; the kernel asks again each second."""
    for _ in range(tries):
        if udp_probe(link, port, n=20, interval_s=0.005).rtt_ms:
            return
    raise AssertionError(f"no echo came back in {tries} warm-up probes")


def tcp_pair(link: Link) -> tuple[socket.socket, socket.socket]:
    """A TCP socket listening in B, and an unconnected one in A."""
    with in_netns(link.ns_b):
        lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    with in_netns(link.ns_a):
        csock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.bind((ADDR_B, 0))
    lsock.listen(1)
    return lsock, csock


def tcp_goodput_mbit(link: Link, nbytes: int, skip_bytes: int) -> tuple[float, str]:
    """Bulk TCP A -> B; goodput after the first ``skip_bytes`` (slow start) and the CC in use."""
    lsock, csock = tcp_pair(link)
    marks: dict[str, float] = {}

    def receive() -> None:
        conn, _ = lsock.accept()
        with conn:
            buf, got = bytearray(1 << 20), 0
            while got < nbytes:
                n = conn.recv_into(buf)
                if not n:
                    break
                got += n
                if got >= skip_bytes and "t_skip" not in marks:
                    marks["t_skip"], marks["b_skip"] = time.monotonic(), got
            marks["t_end"], marks["b_end"] = time.monotonic(), got

    with lsock, csock:
        lsock.settimeout(30)
        rx = threading.Thread(target=receive)
        rx.start()
        csock.connect(lsock.getsockname())
        cc = csock.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b"\0").decode()
        chunk = bytes(1 << 20)
        for _ in range(nbytes // len(chunk)):
            csock.sendall(chunk)
        csock.shutdown(socket.SHUT_WR)
        rx.join(timeout=120)
    assert marks.get("b_end") == nbytes // len(chunk) * len(chunk), marks
    return (marks["b_end"] - marks["b_skip"]) * 8 / (marks["t_end"] - marks["t_skip"]) / 1e6, cc


def _tbf(ns: str, ifname: str, rate_mbit: int, latency_ms: int) -> None:
    with in_netns(ns), IPRoute() as ip:
        ip.tc("add", "tbf", index=ip.link_lookup(ifname=ifname)[0], rate=f"{rate_mbit}mbit",
              burst=256 * 1024, latency=f"{latency_ms}ms")


# --- tests -----------------------------------------------------------------------------------


def test_arp_resolves_through_relay_and_sigterm_writes_stats(tmp_path):
    with relayed_link() as lk:
        with in_netns(lk.ns_b), IPRoute() as ip:
            mac_b = ip.get_links(ip.link_lookup(ifname=lk.if_b)[0])[0].get_attr("IFLA_ADDRESS")
        r = Relay(lk, tmp_path, PathImpairment(delay_ms=2), PathImpairment(delay_ms=2), seed=0)
        try:
            with udp_echo(lk.ns_b, ADDR_B) as port:
                p = udp_probe(lk, port, n=20, interval_s=0.01)
            with in_netns(lk.ns_a), IPRoute() as ip:
                neigh = {n.get_attr("NDA_DST"): n.get_attr("NDA_LLADDR") for n in ip.get_neighbours()}
        finally:
            exit_s = r.stop()
        assert p.loss == 0, r.stderr()
        assert neigh.get(ADDR_B) == mac_b  # learnt by ARP through the relay, no static entry
        assert r.proc.returncode == 0 and exit_s < 1.0, (exit_s, r.stderr())
        st = r.stats()
        for d in ("a_to_b", "b_to_a"):
            assert st[d]["frames_out"] >= 21 and st[d]["dropped_oversize"] == st[d]["tx_errors"] == 0
        print(f"\nrelay exit {exit_s * 1000:.0f} ms after SIGTERM; stats {st['a_to_b']}")
    left = set(netns.listnetns())
    assert not {lk.ns_a, lk.ns_r, lk.ns_b} & left


def test_relay_survives_its_interfaces_going_down_and_up(link, tmp_path):
    with relay(link, tmp_path, PathImpairment(delay_ms=2)) as r, udp_echo(link.ns_b, ADDR_B) as port:
        assert udp_probe(link, port, n=10, interval_s=0.01).loss == 0
        with in_netns(link.ns_r), IPRoute() as ip:
            for ifn in (link.if_ra, link.if_rb):  # the relay's sockets get ENETDOWN once
                ip.link("set", index=ip.link_lookup(ifname=ifn)[0], state="down")
                time.sleep(0.1)
                ip.link("set", index=ip.link_lookup(ifname=ifn)[0], state="up")
        time.sleep(0.3)
        assert r.proc.poll() is None and udp_probe(link, port, n=10, interval_s=0.01).loss == 0
    assert r.stats()["a_to_b"]["rx_errors"] >= 1


@pytest.mark.parametrize("rtt_ms, gso", [(10, False), (50, False), (100, False), (50, True)],
                         ids=["10ms", "50ms", "100ms", "50ms-gso-offloads-on"])
def test_rtt_matches_configured_delay(tmp_path, rtt_ms, gso):
    with relayed_link(offloads_off=not gso) as lk:
        with relay(lk, tmp_path, PathImpairment(delay_ms=rtt_ms / 2), gso=gso) as r, \
                udp_echo(lk.ns_b, ADDR_B) as port:
            resolve_neighbours(lk, port)
            p = udp_probe(lk, port, n=250, interval_s=0.004)
            if gso:  # TCP with every offload on: super-frames cross the relay whole
                goodput, _ = tcp_goodput_mbit(lk, nbytes=20 << 20, skip_bytes=4 << 20)
        r.stop()
    assert p.loss == 0 and r.stats()["a_to_b"]["dropped_oversize"] == 0
    med = statistics.median(p.rtt_ms.values())
    print(f"\n{r.stats()['mode']} mode, RTT configured {rtt_ms} ms: median {med:.3f} ms (error {med - rtt_ms:+.3f}), "
          f"p5 {sorted(p.rtt_ms.values())[12]:.3f}, max {max(p.rtt_ms.values()):.3f}"
          + (f"; TCP {goodput:.0f} Mbit/s" if gso else ""))
    assert abs(med - rtt_ms) <= 1 + 0.05 * rtt_ms


def test_jitter_spread_and_no_reordering(link, tmp_path):
    jitter_ms = 2.0
    with relay(link, tmp_path, PathImpairment(delay_ms=10, jitter_ms=jitter_ms), seed=5), \
            udp_echo(link.ns_b, ADDR_B) as port:
        resolve_neighbours(link, port)
        sparse = udp_probe(link, port, n=400, interval_s=0.012)  # 6 sigma apart: order never binds
        dense = udp_probe(link, port, n=4000, interval_s=0.0002)  # order binds all the time
    sd = statistics.stdev(sparse.rtt_ms.values())
    print(f"\njitter {jitter_ms} ms each way: RTT stdev {sd:.3f} ms (expected {2 ** 0.5 * jitter_ms:.3f}), "
          f"median {statistics.median(sparse.rtt_ms.values()):.3f}; dense stream median RTT "
          f"{statistics.median(dense.rtt_ms.values()):.3f} ms, {len(dense.order)} replies")
    assert sd == pytest.approx(2 ** 0.5 * jitter_ms, rel=0.2)
    assert sparse.loss == 0 and dense.loss == 0
    assert dense.order == sorted(dense.order) and sparse.order == sorted(sparse.order)


def test_loss_each_way(link, tmp_path):
    with relay(link, tmp_path, PathImpairment(delay_ms=1, loss_pct=10), seed=11) as r, \
            udp_echo(link.ns_b, ADDR_B) as port:
        resolve_neighbours(link, port)
        p = udp_probe(link, port, n=2500, interval_s=0.001)
    st = r.stats()
    print(f"\nloss 10% each way: probe loss {p.loss:.2%} (expected 19.00%); relay drops "
          f"{st['a_to_b']['dropped_loss']}/{st['a_to_b']['frames_in']} a->b, "
          f"{st['b_to_a']['dropped_loss']}/{st['b_to_a']['frames_in']} b->a")
    assert p.loss == pytest.approx(1 - 0.9 ** 2, abs=0.03)
    assert p.order == sorted(p.order)


@pytest.mark.parametrize("gso", [False, True], ids=["frame", "gso"])
def test_tcp_goodput_shaped_100mbit_with_40ms_rtt(tmp_path, gso):
    # tbf limit = rate * latency + burst must cover the BDP (100 Mbit/s x 40 ms = 500 KB): 50 ms -> 881 KB
    with relayed_link(offloads_off=not gso) as lk:
        _tbf(lk.ns_a, lk.if_a, rate_mbit=100, latency_ms=50)
        with relay(lk, tmp_path, PathImpairment(delay_ms=20), gso=gso) as r, udp_echo(lk.ns_b, ADDR_B) as port:
            resolve_neighbours(lk, port)
            goodput, cc = tcp_goodput_mbit(lk, nbytes=60 << 20, skip_bytes=12 << 20)
        r.stop()
    st = r.stats()
    print(f"\n{st['mode']} mode, shaped 100 Mbit/s, RTT 40 ms, {cc}: goodput {goodput:.1f} Mbit/s; "
          f"relay CPU {st['cpu_s'] / st['duration_s']:.0%} of a core over {st['duration_s']:.1f} s")
    assert goodput >= 90


@pytest.mark.parametrize("gso", [False, True], ids=["frame", "gso"])
def test_tcp_goodput_unshaped_is_reported(tmp_path, gso):
    with relayed_link(offloads_off=not gso) as lk:
        with relay(lk, tmp_path, PathImpairment(delay_ms=20), gso=gso) as r, udp_echo(lk.ns_b, ADDR_B) as port:
            resolve_neighbours(lk, port)
            goodput, cc = tcp_goodput_mbit(lk, nbytes=(600 if gso else 200) << 20, skip_bytes=100 << 20)
        r.stop()
    st = r.stats()
    ab = st["a_to_b"]
    print(f"\n{st['mode']} mode, unshaped, RTT 40 ms, {cc}: goodput {goodput:.0f} Mbit/s; relay CPU "
          f"{st['cpu_s'] / st['duration_s']:.0%} of a core; mean unit {ab['bytes_in'] / ab['frames_in']:.0f} B; "
          f"socket-buffer drops {ab['kernel_drops']}+{st['b_to_a']['kernel_drops']}")
    assert goodput > 50  # the relay (or the Python endpoints) is the bottleneck: informative only


def test_offloads_left_on_break_frame_mode_and_set_offloads_is_idempotent(tmp_path):
    with relayed_link(offloads_off=False) as lk:
        with in_netns(lk.ns_a):
            assert get_offloads(lk.if_a)["tx-checksum-ip-generic"] is True
        with relay(lk, tmp_path, PathImpairment(delay_ms=1)):
            lsock, csock = tcp_pair(lk)
            with lsock, csock:
                csock.settimeout(1.5)
                with pytest.raises(OSError):  # timeout: the SYN's partial checksum makes B drop it
                    csock.connect(lsock.getsockname())
        with in_netns(lk.ns_a):
            changed = set_offloads(lk.if_a, enabled=False)
            assert changed and not any(changed.values())
            assert set_offloads(lk.if_a, enabled=False) == {}
            assert not any(get_offloads(lk.if_a).values())
            assert set_offloads(lk.if_a, enabled=True)["tx-checksum-ip-generic"] is True


def test_gro_on_the_relay_side_yields_oversize_frames(tmp_path):
    from pyroute2.ethtool import Ethtool

    with relayed_link() as lk:
        with in_netns(lk.ns_r), Ethtool() as et:
            feats = et.get_features(lk.if_ra)
            feats.features["rx-gro"].enable = True
            et.set_features(lk.if_ra, feats)
        with relay(lk, tmp_path, PathImpairment(delay_ms=1)) as r:
            lsock, csock = tcp_pair(lk)
            with lsock, csock:
                csock.settimeout(3)
                csock.connect(lsock.getsockname())
                conn, _ = lsock.accept()
                with conn, contextlib.suppress(TimeoutError):
                    csock.sendall(bytes(8 << 20))  # stalls: merged segments never reach B
        r.stop()
    st = r.stats()["a_to_b"]
    print(f"\nGRO on relay veth: {st['dropped_oversize']} oversize frames dropped of {st['frames_in']}")
    assert st["dropped_oversize"] > 0


def test_run_relay_in_a_thread_stops_on_event(link, tmp_path):
    stop, out = threading.Event(), {}

    def target() -> None:
        with in_netns(link.ns_r):
            out["stats"] = run_relay(link.if_ra, link.if_rb, PathImpairment(3), PathImpairment(3), stop=stop,
                                     ready_file=str(tmp_path / "ready"), stats_path=str(tmp_path / "s.json"))

    t = threading.Thread(target=target)
    t.start()
    try:
        deadline = time.monotonic() + 5
        while not (tmp_path / "ready").exists() and t.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        with udp_echo(link.ns_b, ADDR_B) as port:
            p = udp_probe(link, port, n=30, interval_s=0.005)
    finally:
        stop.set()
        t.join(timeout=1)
    assert not t.is_alive() and p.loss == 0
    assert 6 <= statistics.median(p.rtt_ms.values()) <= 7.5
    st = out["stats"]
    assert st.a_to_b.frames_out >= 30 and json.loads((tmp_path / "s.json").read_text())["mode"] == "frame"
