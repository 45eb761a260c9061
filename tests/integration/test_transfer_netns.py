"""The transfer service across a shaped link between two network namespaces.

Two namespaces ``tb-<run>-xa`` / ``tb-<run>-xb`` joined by one veth, a 100 Mbit/s tbf on the
sending side; the server listens in ``xb`` (sockets made there through ``socket_factory``), the
client sends from ``xa``. Goodput must be within 10 % of what TCP can carry over that tbf
(100 Mbit/s x 1448/1514: payload per full frame with timestamps).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from typing import NamedTuple

import pytest

from testbed.netem.owned.naming import if_name, new_run_id, ns_name
from testbed.netem.nsexec import in_netns, spawn
from testbed.transfer import BallastSource, TransferServer, send

pytestmark = pytest.mark.root
RATE_MBIT = 100.0
IDEAL_MBIT = RATE_MBIT * 1448 / 1514
ADDR_A, ADDR_B = "10.201.0.1", "10.201.0.2"
TOKEN = "netns-token"


def _factory(ns: str):
    def make(family: int, type_: int) -> socket.socket:
        with in_netns(ns):
            return socket.socket(family, type_)
    return make


class Pair(NamedTuple):
    ns_a: str
    ns_b: str
    if_a: str
    if_b: str


@pytest.fixture
def shaped_pair():
    """Two namespaces and a veth between them with a 100 Mbit/s tbf on a's side. Removed on every exit path."""
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces, veth, tc); CI runs these as root")
    from pyroute2 import IPRoute, NetNS, netns

    run = new_run_id()
    ns_a, ns_b = ns_name(run, "xa"), ns_name(run, "xb")
    if_a, if_b = if_name(run, "xa"), if_name(run, "xb")
    created: list[str] = []
    try:
        for ns in (ns_a, ns_b):
            netns.create(ns)
            created.append(ns)
        with IPRoute() as ipr:
            ipr.link("add", ifname=if_a, kind="veth", net_ns_fd=ns_a, peer={"ifname": if_b, "net_ns_fd": ns_b})
        for ns, ifn, addr in ((ns_a, if_a, ADDR_A), (ns_b, if_b, ADDR_B)):
            with NetNS(ns) as n:
                idx = n.link_lookup(ifname=ifn)[0]
                n.addr("add", index=idx, address=addr, prefixlen=24)
                n.link("set", index=idx, state="up")
                n.link("set", index=n.link_lookup(ifname="lo")[0], state="up")
                if ns == ns_a:
                    n.tc("add", "tbf", index=idx, rate=f"{RATE_MBIT:g}mbit", burst=256 * 1024, latency="50ms")
        yield Pair(ns_a, ns_b, if_a, if_b)
    finally:
        for ns in created:
            netns.remove(ns)


def test_goodput_matches_the_shaped_link(shaped_pair):
    ns_a, ns_b = shaped_pair.ns_a, shaped_pair.ns_b
    src = BallastSource(30_000_000, seed=21)
    src.manifest(1 << 20)
    with TransferServer(ADDR_B, token=TOKEN, socket_factory=_factory(ns_b)) as srv:
        r = send(ADDR_B, srv.port, src, transfer_id="netns-1", token=TOKEN, chunk_bytes=1 << 20,
                 socket_factory=_factory(ns_a))
    assert r.status == "completed", r.error
    print(f"\nnetns goodput {r.goodput_mbps:.1f} Mbit/s (ideal {IDEAL_MBIT:.1f}) in {r.t_transfer_s:.2f} s")
    assert r.goodput_mbps == pytest.approx(IDEAL_MBIT, rel=0.10)


def _outage(ns: str, ifname: str, after_s: float, for_s: float) -> None:
    from pyroute2 import NetNS

    time.sleep(after_s)
    with NetNS(ns) as n:
        idx = n.link_lookup(ifname=ifname)[0]
        n.link("set", index=idx, state="down")
        time.sleep(for_s)
        n.link("set", index=idx, state="up")


def test_resume_after_a_link_outage(shaped_pair):
    """The veth goes down for 2 s mid-transfer: the client stalls, reconnects once the link is back,
    the server hands the stale connection's state over, and only the missing chunks are sent."""
    ns_a, ns_b = shaped_pair.ns_a, shaped_pair.ns_b
    src = BallastSource(30_000_000, seed=22)
    src.manifest(1 << 20)
    outage = threading.Thread(target=_outage, args=(ns_a, shaped_pair.if_a, 1.0, 2.0))
    with TransferServer(ADDR_B, token=TOKEN, socket_factory=_factory(ns_b)) as srv:
        outage.start()
        try:
            r = send(ADDR_B, srv.port, src, transfer_id="outage", token=TOKEN, chunk_bytes=1 << 20,
                     io_timeout_s=1.0, connect_timeout_s=1.0, backoff_s=0.2, socket_factory=_factory(ns_a))
        finally:
            outage.join()
    assert r.status == "completed", r.error
    print(f"\noutage: {r.reconnects} reconnects, resume points {r.resume_points}, "
          f"{r.bytes_sent_total / r.size_bytes:.2f} x size sent, t_transfer {r.t_transfer_s:.2f} s")
    assert r.reconnects >= 1 and len(r.resume_points) >= 2 and r.resume_points[-1] > 0
    assert r.bytes_sent_total < 1.5 * r.size_bytes
    assert r.t_transfer_s > 2.0 + 0.9 * r.size_bytes * 8 / (IDEAL_MBIT * 1e6)


def test_unreachable_from_outside_the_namespaces(shaped_pair):
    """The server socket really lives in the namespace: the host (no route to it) cannot reach it."""
    with TransferServer(ADDR_B, token=TOKEN, socket_factory=_factory(shaped_pair.ns_b)) as srv:
        r = send(ADDR_B, srv.port, BallastSource(1000), transfer_id="outside", token=TOKEN, connect_timeout_s=0.5,
                 max_retries=0)
    assert r.status == "failed"


def test_cli_server_process_in_a_namespace(shaped_pair, tmp_path):
    ns_a, ns_b = shaped_pair.ns_a, shaped_pair.ns_b
    ckpt = tmp_path / "model.pt"
    ckpt.write_bytes(os.urandom(3_000_000))
    store = tmp_path / "store"
    store.mkdir()
    proc = spawn(ns_b, [sys.executable, "-m", "testbed.transfer", "serve", "--host", ADDR_B, "--port", "0",
                        "--token", TOKEN, "--dir", str(store)], stdout=subprocess.PIPE, text=True)
    try:
        port = json.loads(proc.stdout.readline())["port"]
        sender = spawn(ns_a, [sys.executable, "-m", "testbed.transfer", "send", "--host", ADDR_B, "--port",
                              str(port), "--token", TOKEN, "--file", str(ckpt), "--ballast-bytes", "2000000",
                              "--transfer-id", "cli-1", "--json"], stdout=subprocess.PIPE, text=True)
        out, _ = sender.communicate(timeout=60)
        report = json.loads(out)
        assert sender.returncode == 0 and report["status"] == "completed", report["error"]
        done = json.loads(proc.stdout.readline())
        assert done["event"] == "completed" and done["ok"] and done["sha256"] == report["sha256"]
        assert (store / "cli-1").read_bytes() == ckpt.read_bytes()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        proc.stdout.close()
