"""The fabric's netem path (``impairment="netem"``) on a real kernel: delay, jitter and loss in a
root netem qdisc with the tbf under it, measured with ping, TCP handshakes and numbered UDP
datagrams.

This host's kernel has no sch_netem, so here these skip; ``testbed vm test`` runs them in a qemu
guest whose kernel has it, and tests/integration/test_vm_guest.py fails if they did not run and
pass there. Tolerances: the delay netem adds (ping RTT minus that of an unimpaired link) within
1 ms + 5 % of the configured RTT; loss within 3 percentage points.
"""

from __future__ import annotations

import collections
import re
import socket
import statistics
import struct
import subprocess
import threading
import time

import pytest

from testbed.netem import fairq
from testbed.netem.fabric import Fabric
from testbed.netem.owned.naming import new_run_id
from testbed.netem.nsexec import in_netns, ipr_in, spawn
from testbed.netem.plan import LinkInput, plan_fabric
from testbed.netem.qdisc import MIN_BURST_BYTES, read_tbf_rate_mbit
from tests.integration.conftest import goodput_mbit, our_namespaces
from tests.integration.guest_support import netem_available, record

pytestmark = [pytest.mark.root, pytest.mark.netem]
SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)  # Linux; Python's socket module lacks the name


@pytest.fixture(scope="module", autouse=True)
def _needs_netem():
    if not netem_available():
        pytest.skip("this kernel has no sch_netem qdisc; `testbed vm test` runs these tests in a qemu guest that has")


def _pair(delay_ms=0.0, jitter_ms=0.0, loss_pct=0.0, rate_mbit=100.0, *, reference: bool = False) -> Fabric:
    """Sites a and b joined by the impaired link; with ``reference``, also a site c joined to a by
    an unimpaired link, whose RTT is what the emulation itself costs (under qemu's software
    emulation about 1 ms; on hardware ~0.05 ms)."""
    links = [LinkInput("a", "b", rate_mbit, rate_mbit, delay_ms=delay_ms, jitter_ms=jitter_ms, loss_pct=loss_pct)]
    if reference:
        links.append(LinkInput("a", "c", rate_mbit, rate_mbit))
    return Fabric(plan_fabric(new_run_id(), ["a", "b", "c"] if reference else ["a", "b"], links, "netem"),
                  purpose="run")


def _within(measured: float, configured: float) -> bool:
    return abs(measured - configured) <= 1.0 + 0.05 * configured


def ping_times_ms(fab: Fabric, n: int = 20, interval_s: float = 0.05, dst: str = "b") -> list[float]:
    """Per-packet ICMP RTTs from site a to site ``dst`` with the system's ping (kernel timestamps; the
    echo is answered by b's kernel, so no userspace scheduling on that side). One ping first: the
    neighbour (ARP) resolution crosses the delayed link too and would count twice."""
    times = []
    for count, interval in ((1, 0.2), (n, interval_s)):
        argv = ["ping", "-n", "-c", str(count), "-i", str(interval), "-W", "2", fab.site_addr(dst)]
        proc = spawn(fab.site_ns("a"), argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0, out
        times = [float(t) for t in re.findall(r"time=([\d.]+) ms", out)]
    assert len(times) >= 0.95 * n
    return times


class UdpSink:
    """Counts the numbered UDP datagrams that reach site b; :meth:`send` sends them from site a,
    paced in bursts so the veth backlog never overflows (only netem may drop)."""

    WARM_UP = 1 << 30

    def __init__(self, fab: Fabric, port: int):
        self.fab, self.port = fab, port
        with in_netns(fab.site_ns("b")):
            self.srv = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            self.srv.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 8 << 20)
            self.srv.bind((fab.site_addr("b"), port))
        except OSError:
            self.srv.close()
            raise
        self.srv.settimeout(0.2)
        self.received: set[int] = set()
        self._stop = threading.Event()
        self._th = threading.Thread(target=self._serve, daemon=True)
        self._th.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                data = self.srv.recv(2048)
            except TimeoutError:
                continue
            self.received.add(struct.unpack_from("!I", data)[0])

    def close(self) -> None:
        self._stop.set()
        self._th.join(timeout=5)
        self.srv.close()

    def send(self, n: int, burst: int = 50, pause_s: float = 0.002, settle_s: float = 0.5) -> int:
        """Send ``n`` datagrams (numbered 0..n-1); returns how many arrived.

        First, datagrams numbered from ``WARM_UP`` until one arrives: the neighbour (ARP) lookup
        crosses the lossy link too, and while it is retried the kernel queues only a few
        datagrams and drops the rest, which would count as link loss."""
        with in_netns(self.fab.site_ns("a")):
            c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            c.connect((self.fab.site_addr("b"), self.port))
            deadline = time.monotonic() + 20.0
            warm = self.WARM_UP
            while not any(seq >= self.WARM_UP for seq in list(self.received)):
                assert time.monotonic() < deadline, "no datagram reached site b"
                c.send(struct.pack("!I", warm) + b"x" * 60)
                warm += 1
                time.sleep(0.05)
            for seq in range(n):
                c.send(struct.pack("!I", seq) + b"x" * 60)
                if seq % burst == burst - 1:
                    time.sleep(pause_s)
        finally:
            c.close()
        time.sleep(settle_s)
        return sum(1 for seq in list(self.received) if seq < n)


def _udp_rcvbuf_errors(ns: str) -> int:
    """UDP datagrams the namespace's sockets dropped for want of buffer (not lost on the link)."""
    with in_netns(ns), open("/proc/thread-self/net/snmp") as fh:
        rows = [ln.split() for ln in fh if ln.startswith("Udp:")]
    return int(dict(zip(rows[0][1:], rows[1][1:]))["RcvbufErrors"])


def test_netem_qdisc_tree_and_rate_change_in_place():
    with _pair(delay_ms=5.0, rate_mbit=50.0) as fab:
        link = fab.plan.link("a", "b")
        with ipr_in(fab.site_ns("a")) as n:
            idx = n.link_lookup(ifname=link.if_a)[0]
            tree = sorted((q.get_attr("TCA_KIND"), q["handle"], q["parent"]) for q in n.get_qdiscs(index=idx))
            kinds = collections.Counter(kind for kind, _, _ in tree)
            assert kinds == {"netem": 1, "tbf": 1, "htb": 1, "bfifo": fairq.BUCKETS}  # the fair queue under the tbf
            (_, netem_h, _), = [q for q in tree if q[0] == "netem"]
            (_, tbf_h, tbf_p), = [q for q in tree if q[0] == "tbf"]
            (_, htb_h, htb_p), = [q for q in tree if q[0] == "htb"]
            assert netem_h == 0x10000 and (tbf_h, tbf_p) == (0x20000, 0x10000)  # netem 1: root, tbf 2: under it
            assert (htb_h, htb_p) == (fairq.HTB_HANDLE << 16, 0x20001)  # the htb 10: in the tbf's class 2:1
            assert read_tbf_rate_mbit(n, idx) == pytest.approx(50.0)
        call_s = fab.set_rate("a", "b", 20.0)
        fab.release_netlink()
        with ipr_in(fab.site_ns("a")) as n:
            assert read_tbf_rate_mbit(n, idx) == pytest.approx(20.0)
            after = sorted((q.get_attr("TCA_KIND"), q["handle"], q["parent"]) for q in n.get_qdiscs(index=idx))
        assert after == tree  # changed in place, not re-added: the fair queue kept
        record("rate_change", call_ms=call_s * 1000)
    assert our_namespaces(fab.plan.run_id) == []


@pytest.mark.parametrize("delay_ms", [25.0, 50.0])
def test_netem_delay(delay_ms):
    from testbed.bench.shaping import handshake_rtt_ms

    rtt = 2 * delay_ms  # netem on both sides: one-way delay each way
    with _pair(delay_ms=delay_ms, reference=True) as fab:
        base = statistics.median(ping_times_ms(fab, dst="c"))
        pings = ping_times_ms(fab)
        tcp = handshake_rtt_ms(fab, "a", "b", 5311, n=10)
    median = statistics.median(pings)
    record("delay", configured_rtt_ms=rtt, ping_median_ms=median, ping_min_ms=min(pings),
           ping_max_ms=max(pings), base_rtt_ms=base, tcp_handshake_ms=tcp)
    assert _within(median - base, rtt), (base, pings)  # the delay netem adds
    assert min(pings) >= rtt - 0.5, pings  # netem never delivers early
    # a handshake timed in Python also counts the scheduling of both ends (a few ms under emulation)
    assert rtt - 0.5 <= tcp <= 1.1 * rtt + 3.0, tcp


def test_netem_jitter():
    d, j = 20.0, 5.0
    with _pair(delay_ms=d, jitter_ms=j, reference=True) as fab:
        base = statistics.median(ping_times_ms(fab, dst="c"))
        pings = sorted(ping_times_ms(fab, 120, 0.05))
    # each way uniform in d +- j: the RTT is triangular on 2d +- 2j, with median 2d, IQR
    # 2j(2 - sqrt(2)) = 1.17 j (5.9 ms) and 95th percentile 2d + (2 - sqrt(0.4)) j = 2d + 1.37 j
    median = statistics.median(pings)
    q1, _, q3 = statistics.quantiles(pings, n=4)
    p95 = pings[int(0.95 * len(pings)) - 1]
    record("jitter", configured_rtt_ms=2 * d, jitter_ms=j, median_ms=median, base_rtt_ms=base, iqr_ms=q3 - q1,
           sd_ms=statistics.stdev(pings), min_ms=pings[0], p95_ms=p95, max_ms=pings[-1], samples=len(pings))
    assert _within(median - base, 2 * d)
    assert 0.6 * 1.17 * j <= q3 - q1 <= 1.5 * 1.17 * j  # without jitter it is ~0.5 ms
    assert pings[0] >= 2 * (d - j) - 0.5  # never earlier than the smallest delay
    assert _within(p95 - base, 2 * d + 1.37 * j)


def test_netem_loss():
    loss_pct, n = 10.0, 2000
    with _pair(loss_pct=loss_pct) as fab:
        sink = UdpSink(fab, 5313)
        try:
            before = _udp_rcvbuf_errors(fab.site_ns("b"))
            got = sink.send(n)
            assert _udp_rcvbuf_errors(fab.site_ns("b")) == before  # losses are netem's, not the socket's
        finally:
            sink.close()
    measured = 100.0 * (n - got) / n
    record("loss", configured_pct=loss_pct, measured_pct=measured, sent=n, received=got)
    assert abs(measured - loss_pct) <= 3.0


def test_netem_goodput_under_delay():
    rate, delay_ms = 20.0, 5.0
    n_bytes = int(rate * 125_000 * 2)  # 2 s at line rate
    with _pair(delay_ms=delay_ms, rate_mbit=rate) as fab:
        g = goodput_mbit(fab.site_ns("a"), fab.site_ns("b"), fab.site_addr("b"), n_bytes, port=5314)
    record("goodput", configured_mbit=rate, delay_ms=delay_ms, goodput_mbit=g)
    # the tbf's burst leaves before the receiver's clock starts: allow it on top of the line rate
    assert 0.85 * rate <= g <= 1.01 * rate * (1 + MIN_BURST_BYTES / n_bytes)


GUEST_CONTENTION_MBIT = 20.0  # what the guest carries under software emulation (see test_netem_goodput_under_delay)


@pytest.mark.parametrize("n_flows", [1, 4])
def test_a_transfer_beside_competing_flows_netem_against_the_relay(n_flows):
    """`testbed bench shaping --only contention`'s row, netem and the delay relay side by side in the
    same guest: one transfer beside ``n_flows`` generated cubic flows on a 20 Mbit/s, 20 ms RTT link.
    Neither may starve the transfer or leave the link idle; the shares and Jain's index are recorded
    (docs/measured/benchmarks.md)."""
    from testbed.bench.shaping import contention_row

    for shaper in ("netem", "relay"):
        r = contention_row(GUEST_CONTENTION_MBIT, n_flows, shaper)
        record("contention", **r)
        assert r["finished"] and r["transfer_mbit"] is not None, (shaper, r)
        assert r["share_of_configured"] >= 0.3, (shaper, r)  # not starved
        assert r["total_mbit"] >= 0.7 * GUEST_CONTENTION_MBIT, (shaper, r)  # the link is used
