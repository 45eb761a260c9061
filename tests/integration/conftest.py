"""Integration tests need root and network namespaces. CI runs as root, so they run there;
they skip only where root is really absent, and say so."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time

import pytest

def two_sites_topology(bandwidth_gbps: float = 0.1, latency_ms: float = 15) -> str:
    """A topology file's text: sites left and right joined by one link."""
    return (f"name: two\nsites:\n  - {{name: left, lat_deg: 45.0, lon_deg: 9.0}}\n"
            f"  - {{name: right, lat_deg: 48.0, lon_deg: 11.0}}\n"
            f"links:\n  - {{a: left, b: right, bandwidth_gbps: {bandwidth_gbps:g}, latency_ms: {latency_ms:g}}}\n")


TWO_SITES_TOPOLOGY = two_sites_topology()
"""Two sites joined by one 100 Mbit/s, 15 ms link: the `testbed net` tests' topology."""


def testbed_cli(*args: str, check: bool = True, timeout_s: float = 180) -> subprocess.CompletedProcess:
    """``python -m testbed ARGS`` in a child, its output captured as text."""
    return subprocess.run([sys.executable, "-m", "testbed", *args], capture_output=True, text=True,
                          timeout=timeout_s, check=check)


def pytest_collection_modifyitems(config, items):
    if os.geteuid() == 0:
        return
    skip = pytest.mark.skip(reason="needs root (network namespaces, veth, tc); CI runs these as root")
    for item in items:
        if "root" in item.keywords:
            item.add_marker(skip)


def goodput_mbit(src_ns: str, dst_ns: str, dst_addr: str, n_bytes: int, port: int = 5201) -> float:
    """Receiver-side TCP goodput from src_ns to dst_addr (in dst_ns): first to last byte."""
    from testbed.netem.nsexec import in_netns

    with in_netns(dst_ns):
        srv = socket.socket()
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind((dst_addr, port))
        srv.listen(1)
    result: dict = {}

    def sink() -> None:
        conn, _ = srv.accept()
        buf = bytearray(1 << 20)
        got, t_first = 0, None
        while True:
            n = conn.recv_into(buf)
            if not n:
                break
            if t_first is None:
                t_first = time.perf_counter()
            got += n
        result["bytes"], result["s"] = got, time.perf_counter() - t_first
        conn.close()

    th = threading.Thread(target=sink)
    th.start()
    with in_netns(src_ns):
        cl = socket.create_connection((dst_addr, port), timeout=30)
    chunk = b"\0" * (1 << 20)
    left = n_bytes
    while left > 0:
        cl.sendall(chunk[: min(left, len(chunk))])
        left -= min(left, len(chunk))
    cl.close()
    th.join(timeout=120)
    srv.close()
    assert result["bytes"] == n_bytes
    return result["bytes"] * 8 / result["s"] / 1e6


def our_namespaces(run_id: str) -> list[str]:
    from pyroute2 import netns

    return [n for n in netns.listnetns() if n.startswith(f"tb-{run_id}-")]


def assert_link_queue(fab, queue: str) -> None:
    """Both directions of ``fab``'s first link hold the fair queue under their tbf (``queue`` "fair":
    one htb with one bfifo per class), or only the tbf's own FIFO ("fifo")."""
    from testbed.netem import fairq
    from testbed.netem.nsexec import ipr_in

    link = fab.plan.links[0]
    for site, ifname in ((link.a, link.if_a), (link.b, link.if_b)):
        with ipr_in(fab.site_ns(site)) as n:
            idx = n.link_lookup(ifname=ifname)[0]
            kinds = [q.get_attr("TCA_KIND") for q in n.get_qdiscs(index=idx)]
            classes = [c for c in n.get_classes(index=idx) if c.get_attr("TCA_KIND") == "htb"]
        assert "tbf" in kinds, (site, kinds)
        if queue == "fair":
            assert kinds.count("htb") == 1 and kinds.count("bfifo") == fairq.BUCKETS, (site, kinds)
            assert len(classes) == fairq.BUCKETS
        else:
            assert "htb" not in kinds and not classes, (site, kinds)
