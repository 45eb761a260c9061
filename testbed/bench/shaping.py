"""``testbed bench shaping``: how faithfully this machine emulates WAN links.

Measures, on real fabrics built exactly as runs build them:
- configured vs achieved goodput at 10, 100, 1000 Mbit/s and unshaped, by our transfer service
  and by iperf3 as an independent client, beside the ideal TCP efficiency (1448/1514);
- configured vs measured RTT for 10/50/100 ms (delay relay, or netem where the kernel has it);
- how long an in-place rate change takes to take effect (netlink call, replay lag, and the
  receiver's rate settling), driven through the same LinkReplayer a run uses;
- the time to bring up and tear down a large topology (us-100) and what it leaves behind, side by
  side with Mininet bringing up and stopping 100 hosts with tc links on the same machine
  (``--only us100`` runs just that part);
- a transfer under contention (issue #33): one transfer by our transfer service sharing a 1 Gbit/s
  and a 10 Gbit/s link of 20 ms RTT with 1, 4 and 16 competing bulk TCP flows (the cross-traffic
  generator a run starts, on a link built as a run builds one with cross-traffic), its goodput
  against its fair share, and Jain's fairness index over all the flows (``--only contention``).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from testbed.netem.fabric import Fabric
from testbed.netem.owned.naming import new_run_id
from testbed.netem.nsexec import in_netns, socket_factory, spawn
from testbed.netem.links import fabric_links
from testbed.netem.plan import plan_fabric
from testbed.netem.tcp_cc import DEFAULT as DEFAULT_TCP_CC
from testbed.link import DirectedLink

IDEAL = 1448 / 1514
TOPOLOGY_RATIO_TARGET = 2.0  # us-100 up + down within 2x of Mininet's 100 hosts with tc links
MININET_HOSTS = 100
MININET_CMD = "mn --topo single,100 --link tc --switch lxbr --controller none --test none"
UNSHAPED_MBIT = 30_000.0  # tbf at 30 Gbit/s: above what a veth carries here, i.e. unshaped
_ROOT = Path(__file__).resolve().parents[2]


def _pair(rate_mbit: float, delay_ms: float = 0.0, impairment: str = "none", *, jitter_ms: float = 0.0,
          loss_pct: float = 0.0, tcp_congestion: str = DEFAULT_TCP_CC) -> Fabric:
    """Two sites a and b joined by one symmetric link of ``rate_mbit``, one-way ``delay_ms`` (wall
    clock), ``jitter_ms`` and ``loss_pct``, the sites' TCP on ``tcp_congestion``."""
    links = [DirectedLink(src, dst, bandwidth_gbps=rate_mbit / 1000, latency_ms=delay_ms, jitter_ms=jitter_ms,
                          loss_pct=loss_pct) for src, dst in ("ab", "ba")]
    return Fabric(plan_fabric(new_run_id(), ["a", "b"], fabric_links(links), impairment,  # type: ignore[arg-type]
                              tcp_congestion=tcp_congestion), purpose="run")


def _transfer_goodput(fab: Fabric, n_bytes: int) -> float:
    from testbed.transfer.client import send
    from testbed.transfer.server import TransferServer
    from testbed.transfer.source import BallastSource

    src = BallastSource(n_bytes, seed=1)
    chunk = min(4 << 20, max(64 << 10, n_bytes // 16))
    src.manifest(chunk)
    with TransferServer(fab.site_addr("b"), 7100, token="bench", socket_factory=socket_factory(fab.site_ns("b"))):
        rep = send(fab.site_addr("b"), 7100, src, transfer_id="bench", token="bench", chunk_bytes=chunk,
                   socket_factory=socket_factory(fab.site_ns("a")))
    if rep.status != "completed":
        raise RuntimeError(f"bench transfer failed: {rep.error}")
    return rep.goodput_mbps


def _iperf3_goodput(fab: Fabric, seconds: float) -> float | None:
    exe = shutil.which("iperf3")
    if exe is None:
        return None
    server = spawn(fab.site_ns("b"), [exe, "-s", "-1", "-B", fab.site_addr("b"), "-p", "5299"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        client = spawn(fab.site_ns("a"), [exe, "-c", fab.site_addr("b"), "-p", "5299", "-t", str(seconds), "-J"],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        out, _ = client.communicate(timeout=seconds + 30)
        data = json.loads(out)
        return data["end"]["sum_received"]["bits_per_second"] / 1e6
    finally:
        if server.poll() is None:
            server.terminate()
        server.wait(timeout=10)


def goodput_rows(rates=(10.0, 100.0, 1000.0), seconds: float = 4.0) -> list[dict]:
    rows = []
    for rate in [*rates, UNSHAPED_MBIT]:
        with _pair(rate) as fab:
            shaped = rate != UNSHAPED_MBIT
            n_bytes = int(rate * 1e6 / 8 * seconds) if shaped else 2_000_000_000
            ours = _transfer_goodput(fab, n_bytes)
            iperf = _iperf3_goodput(fab, seconds)
        rows.append({
            "configured_mbit": rate if shaped else None, "transfer_service_mbit": ours, "iperf3_mbit": iperf,
            "transfer_ratio": ours / rate if shaped else None,
            "iperf3_ratio": (iperf / rate) if (shaped and iperf) else None, "ideal_ratio": IDEAL,
        })
    return rows


def handshake_rtt_ms(fab: Fabric, src: str = "a", dst: str = "b", port: int = 5298, n: int = 50) -> float:
    """Median TCP handshake time (one RTT) from ``src`` to ``dst``'s site address."""
    with in_netns(fab.site_ns(dst)):
        srv = socket.socket()
        srv.bind((fab.site_addr(dst), port))
        srv.listen(64)
    samples = []
    try:
        for _ in range(n):
            with in_netns(fab.site_ns(src)):
                c = socket.socket()
            t0 = time.perf_counter()
            c.connect((fab.site_addr(dst), port))
            samples.append((time.perf_counter() - t0) * 1000)
            c.close()
            srv.accept()[0].close()
    finally:
        srv.close()
    return statistics.median(samples)


def rtt_rows(impairment: str, rtts=(10.0, 50.0, 100.0)) -> list[dict]:
    rows = []
    for rtt in rtts:
        with _pair(100.0, rtt / 2, impairment) as fab:
            got = handshake_rtt_ms(fab)
        tol = 1.0 + 0.05 * rtt
        rows.append({"configured_rtt_ms": rtt, "measured_rtt_ms": got, "error_ms": got - rtt, "tolerance_ms": tol,
                     "within_target": abs(got - rtt) <= tol, "method": f"median TCP handshake, {impairment}"})
    return rows


def rate_change_row() -> dict:
    """Stream at 200 Mbit/s; a replayer scheduled at t = 1 s cuts the link to 20 Mbit/s.
    The receiver counts bytes per 10 ms; the change has 'taken effect' when the receiver's
    100 ms moving rate first falls below 1.5 x the new rate."""
    from testbed.substrate.emulated.clock import EmulationClock
    from testbed.substrate.emulated.replay import LinkReplayer, RateChange

    with _pair(200.0) as fab:
        with in_netns(fab.site_ns("b")):
            srv = socket.socket()
            srv.bind((fab.site_addr("b"), 5297))
            srv.listen(1)
        bins: list[tuple[float, int]] = []
        stop = threading.Event()

        def sink():
            conn, _ = srv.accept()
            conn.settimeout(0.01)
            buf = bytearray(1 << 20)
            while not stop.is_set():
                try:
                    n = conn.recv_into(buf)
                except TimeoutError:
                    n = 0
                bins.append((time.monotonic(), n))
                if n == 0 and conn.fileno() < 0:
                    break
            conn.close()

        th = threading.Thread(target=sink, daemon=True)
        th.start()
        with in_netns(fab.site_ns("a")):
            cl = socket.create_connection((fab.site_addr("b"), 5297))
        clock = EmulationClock(1.0, skip_idle=False)
        rep = LinkReplayer([RateChange(1.0, "a", "b", 20.0)], clock, fab.set_rate, fab.release_netlink)
        sender_stop = threading.Event()

        def pump():
            chunk = b"\0" * 65536
            while not sender_stop.is_set():
                try:
                    cl.sendall(chunk)
                except OSError:
                    return

        pt = threading.Thread(target=pump, daemon=True)
        clock.start(0.0)
        t_zero = time.monotonic()
        pt.start()
        rep.start()
        time.sleep(2.5)
        sender_stop.set()
        stop.set()
        cl.close()
        rep.stop()
        th.join(timeout=5)
        srv.close()
    applied = rep.applied[0]
    t_change = t_zero + 1.0
    effect_s = None
    window = 0.1
    for i, (t, _) in enumerate(bins):
        if t < t_change:
            continue
        recent = [n for (tt, n) in bins[: i + 1] if tt > t - window]
        if sum(recent) * 8 / window / 1e6 < 1.5 * 20.0:
            effect_s = t - t_change
            break
    return {"from_mbit": 200.0, "to_mbit": 20.0, "netlink_call_ms": applied["call_ms"],
            "replay_lag_ms": applied["lag_wall_ms"], "receiver_settled_ms": None if effect_s is None else effect_s * 1000,
            "target_ms": 100.0,
            "note": "receiver_settled includes draining the tbf queue built at the old rate (limit = 50 ms of it)"}


def settle_netns(timeout_s: float = 30.0) -> float:
    """Wait until the kernel has finished destroying removed network namespaces (that work runs
    after ``ip netns del``/unmount returns and would slow the next measurement down); returns
    the seconds waited. Reads the ``net_namespace`` slab count; without it, waits 2 s."""
    t0 = time.monotonic()

    def count() -> int | None:
        try:
            for line in Path("/proc/slabinfo").read_text().splitlines():
                if line.startswith("net_namespace "):
                    return int(line.split()[1])
        except (OSError, ValueError, IndexError):
            return None
        return None

    last = count()
    if last is None:
        time.sleep(2.0)
        return time.monotonic() - t0
    stable_since = time.monotonic()
    while time.monotonic() - t0 < timeout_s and time.monotonic() - stable_since < 1.0:
        time.sleep(0.1)
        now = count()
        if now != last:
            last, stable_since = now, time.monotonic()
    return time.monotonic() - t0


@contextlib.contextmanager
def env_set(name: str, value: str | None) -> Iterator[None]:
    """``os.environ[name] = value`` for the block (None: leave it as it is), then as it was."""
    old = os.environ.get(name)
    if value is not None:
        os.environ[name] = value
    try:
        yield
    finally:
        if value is not None:
            if old is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = old


def topology_row(path: Path, impairment: str, *, relay_procs: int | None = None, rtt_samples: int = 3) -> dict:
    """Fabric.up/down of a topology in this process (what a run does). ``relay_procs``: compiled
    relay processes to serve the links (``TESTBED_RELAY_PROCS``; default: one per CPU). While it is
    up (not timed): the idle RTT of ``rtt_samples`` links spread over the topology."""
    from pyroute2 import netns

    from testbed.netem.links import file_links
    from testbed.netem.relay.relaypool import RELAY_PROCS_ENV

    sites, links = file_links(path)
    plan = plan_fabric(new_run_id(), sites, links, impairment)  # type: ignore[arg-type]
    with env_set(RELAY_PROCS_ENV, None if relay_procs is None else str(relay_procs)):
        fab = Fabric(plan, purpose="run")
        t0 = time.perf_counter()
        fab.up()
        up_s = time.perf_counter() - t0
    n_ns = len([n for n in netns.listnetns() if plan.run_id in n])
    n_procs = len(set(fab.relay_pids().values()))
    rtts = []
    try:
        step = max(1, len(plan.links) // max(1, rtt_samples))
        for i, lk in enumerate(plan.links[::step][:rtt_samples]):
            got = handshake_rtt_ms(fab, lk.a, lk.b, 5330 + i, n=10)
            rtts.append({"link": lk.key, "configured_rtt_ms": lk.rtt_ms, "actual_idle_rtt_ms": got,
                         "within_target": abs(got - lk.rtt_ms) <= 1.0 + 0.05 * lk.rtt_ms})
    except BaseException:
        fab.down()
        raise
    t0 = time.perf_counter()
    fab.down()
    down_s = time.perf_counter() - t0
    left = [n for n in netns.listnetns() if plan.run_id in n]
    return {"topology": path.name, "sites": len(sites), "links": len(links), "impairment": impairment,
            "namespaces": n_ns, "relays": sum(1 for lk in plan.links if lk.relay_ns), "relay_processes": n_procs,
            "up_s": up_s, "down_s": down_s, "leftover_namespaces": len(left), "target_up_s": 60.0, "rtt": rtts}


def cli_row(path: Path, impairment: str, timeout_s: float = 300.0) -> dict:
    """``testbed net up FILE`` then ``testbed net down --run ID``, each a fresh process (what a user
    types; includes interpreter start-up and imports), wall-clock."""
    testbed = [sys.executable, "-m", "testbed"]
    t0 = time.perf_counter()
    up = subprocess.run([*testbed, "net", "up", str(path), "--impairment", impairment],
                        capture_output=True, text=True, timeout=timeout_s)
    up_s = time.perf_counter() - t0
    m = re.search(r"network (\S+) up in", up.stdout)
    if up.returncode != 0 or not m:
        raise RuntimeError(f"testbed net up failed ({up.returncode}): {(up.stderr or up.stdout).strip()[-300:]}")
    run_id = m.group(1)
    t0 = time.perf_counter()
    down = subprocess.run([*testbed, "net", "down", "--run", run_id], capture_output=True, text=True,
                          timeout=timeout_s)
    down_s = time.perf_counter() - t0
    if down.returncode != 0:
        raise RuntimeError(f"testbed net down failed ({down.returncode}): {(down.stderr or down.stdout).strip()[-300:]}")
    return {"command_up": f"testbed net up {path.relative_to(_ROOT) if path.is_relative_to(_ROOT) else path}",
            "command_down": "testbed net down --run ID", "up_s": up_s, "down_s": down_s}


# Runs under Mininet's own interpreter: what `mn --topo single,N --link tc[,bw=B] --switch lxbr
# --controller none --test none` does (build, start, stop), timed per phase. Not the `mn` command
# itself: on any error `mn` runs its cleanup, which kills and deletes by name (processes and
# interfaces of every Mininet on the machine); here an error only stops this network.
_MININET_SCRIPT = r"""
import functools, json, sys, time
from mininet.link import TCLink
from mininet.log import setLogLevel
from mininet.net import Mininet
from mininet.nodelib import LinuxBridge
from mininet.topo import SingleSwitchTopo

setLogLevel("error")
k, bw = int(sys.argv[1]), (float(sys.argv[2]) if sys.argv[2] != "none" else None)
link = functools.partial(TCLink, bw=bw) if bw else TCLink
t0 = time.perf_counter()
net = Mininet(topo=SingleSwitchTopo(k=k), link=link, switch=LinuxBridge, controller=None, build=False)
try:
    net.build()
    net.start()
    up = time.perf_counter() - t0
    hosts = len(net.hosts)
finally:
    t0 = time.perf_counter()
    net.stop()
    down = time.perf_counter() - t0
print(json.dumps({"up_s": up, "down_s": down, "hosts": hosts}))
"""


def _mininet_python() -> str | None:
    """The interpreter of the installed ``mn`` (its ``#!`` line), if Mininet is installed."""
    mn = shutil.which("mn")
    if mn is None:
        return None
    try:
        first = Path(mn).read_text(errors="replace").splitlines()[0]
    except (OSError, IndexError):
        return None
    return first[2:].strip().split()[0] if first.startswith("#!") else None


def mininet_row(n_hosts: int = MININET_HOSTS, bw_mbit: float | None = None, timeout_s: float = 300.0) -> dict:
    """Mininet bringing up and stopping ``n_hosts`` hosts on one Linux bridge with tc links, timed.
    ``available: False`` (with the reason) where Mininet is missing or cannot run here."""
    cmd = MININET_CMD.replace("single,100", f"single,{n_hosts}")
    if bw_mbit:
        cmd = cmd.replace("--link tc", f"--link tc,bw={bw_mbit:g}")
    row: dict = {"command": cmd, "hosts": n_hosts, "bw_mbit": bw_mbit, "available": False}
    python = _mininet_python()
    if python is None:
        row["reason"] = "Mininet is not installed (no `mn` on PATH)"
        return row
    if os.path.exists("/sys/class/net/s1"):
        row["reason"] = "an interface s1 exists (another Mininet is up): not measured"
        return row
    try:
        out = subprocess.run([python, "-c", _MININET_SCRIPT, str(n_hosts), f"{bw_mbit:g}" if bw_mbit else "none"],
                             capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as e:
        row["reason"] = f"Mininet did not finish: {e}"
        return row
    try:
        data = json.loads(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        err = (out.stderr or out.stdout).strip().splitlines()
        row["reason"] = f"Mininet failed (exit {out.returncode}): {err[-1] if err else 'no output'}"
        return row
    row.update(data, available=True)
    return row


def us100_comparison(impairment: str, repeat: int = 1) -> dict:
    """us-100 up/down (in-process Fabric and the `testbed net` CLI) next to Mininet's 100 hosts with tc
    links, measured alternately on this machine; the kernel finishes destroying namespaces between
    measurements. Keeps the fastest of ``repeat`` rounds of each."""
    from testbed.netem.relay.fastrelay import available as fast_available
    from testbed.netem.links import file_links

    path = _ROOT / "topologies" / "us-100.yaml"
    per_link = impairment == "relay" and fast_available()  # also: the compiled relay, one process per link
    n_links = len(file_links(path)[1])
    fabric, cli, mn, mn_bw, one_per_link = [], [], [], [], []
    for _ in range(repeat):
        settle_netns()
        mn.append(mininet_row())
        settle_netns()
        mn_bw.append(mininet_row(bw_mbit=1000.0))
        settle_netns()
        fabric.append(topology_row(path, impairment))
        settle_netns()
        cli.append(cli_row(path, impairment))
        if per_link:
            settle_netns()
            one_per_link.append(topology_row(path, impairment, relay_procs=n_links, rtt_samples=0))

    def best(rows: list[dict]) -> dict:
        ok = [r for r in rows if r.get("available", True)]
        return min(ok, key=lambda r: r["up_s"] + r["down_s"]) if ok else rows[-1]

    top, c, m, mb = best(fabric), best(cli), best(mn), best(mn_bw)
    out: dict = {"topology": top, "cli": c, "mininet": m, "mininet_bw": mb, "repeat": repeat,
                 "ratio_target": TOPOLOGY_RATIO_TARGET}
    if one_per_link:
        out["topology_relay_per_link"] = best(one_per_link)
    if m.get("available"):
        mn_total = m["up_s"] + m["down_s"]
        out["ratio_fabric"] = (top["up_s"] + top["down_s"]) / mn_total
        out["ratio_cli"] = (c["up_s"] + c["down_s"]) / mn_total
    return out


CONTENTION_RATES_MBIT = (1000.0, 10_000.0)
CONTENTION_FLOWS = (1, 4, 16)
CONTENTION_RTT_MS = 20.0
TRANSFER_PORT = 7100


def jain_index(rates) -> float | None:
    """Jain's fairness index (sum x)^2 / (n sum x^2) of the flows' rates: 1 when all are equal, 1/n
    when one flow takes everything; None without a positive rate."""
    x = [float(r) for r in rates]
    sq = sum(r * r for r in x)
    return (sum(x) ** 2) / (len(x) * sq) if x and sq > 0 else None


def _contended_pair(rate_mbit: float, n_flows: int, rtt_ms: float, impairment: str) -> Fabric:
    """Sites a and b on one link of ``rate_mbit`` and ``rtt_ms``, with ``n_flows`` long-lived bulk TCP
    flows a -> b from the cross-traffic generator, built as a run builds a link with cross-traffic
    (no BIG TCP; the sites' congestion control)."""
    import dataclasses

    from testbed.netem.crosstraffic import plan_cross_traffic
    from testbed.spec.cross_traffic import CrossTraffic

    links = [DirectedLink(src, dst, bandwidth_gbps=rate_mbit / 1000, latency_ms=rtt_ms / 2) for src, dst in ("ab", "ba")]
    plan = plan_fabric(new_run_id(), ["a", "b"], fabric_links(links), impairment,  # type: ignore[arg-type]
                       tcp_congestion=DEFAULT_TCP_CC)
    xt = plan_cross_traffic([CrossTraffic(src="a", dst="b", tcp={"flows": n_flows})])
    return Fabric(dataclasses.replace(plan, cross_traffic=xt), purpose="run")


_SS_SOCKET = re.compile(r"^(?:[A-Z][A-Z0-9-]*\s+)?\d+\s+\d+\s+(\S+):(\d+)\s+(\S+):(\d+)")
_SS_ACKED = re.compile(r"bytes_acked:(\d+)")


def tcp_acked(ss_output: str) -> dict[tuple[int, int], int]:
    """``ss -tinH`` output -> bytes acknowledged per connection, keyed by (local port, peer port)."""
    out: dict[tuple[int, int], int] = {}
    key = None
    for line in ss_output.splitlines():
        m = _SS_SOCKET.match(line)
        if m:
            key = (int(m.group(2)), int(m.group(4)))
            line = line[m.end():]
        a = _SS_ACKED.search(line)
        if a and key is not None:
            out[key] = int(a.group(1))
            key = None
    return out


def _acked(fab: Fabric, dst_addr: str) -> tuple[float, dict[tuple[int, int], int]]:
    p = spawn(fab.site_ns("a"), ["ss", "-tinH", "state", "established", "dst", dst_addr],
              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    out, _ = p.communicate(timeout=10)
    return time.monotonic(), tcp_acked(out)


def _rates(a: tuple, b: tuple) -> dict[tuple[int, int], float]:
    """Mbit/s per connection present in both samples."""
    dt = b[0] - a[0]
    return {k: 8 * (b[1][k] - a[1][k]) / dt / 1e6 for k in b[1] if k in a[1] and dt > 0}


def contention_row(rate_mbit: float, n_flows: int, impairment: str, *, rtt_ms: float = CONTENTION_RTT_MS,
                   seconds: float = 4.0, warmup_s: float = 2.0, limit_s: float = 20.0) -> dict:
    """One transfer beside ``n_flows`` competing flows: the competing flows run ``warmup_s`` first
    (their total over its last second sizes the transfer at ``seconds`` of its fair share of it);
    then per connection the bytes acknowledged (``ss``) while the transfer runs, from its first
    sample to its last: the transfer's goodput, each competing flow's, and Jain's index over all.
    A transfer still running after ``limit_s`` (a starved one) is measured up to then and ended
    with the fabric (``finished`` false)."""
    with _contended_pair(rate_mbit, n_flows, rtt_ms, impairment) as fab:
        b = fab.site_addr("b")
        time.sleep(max(0.0, warmup_s - 1.0))
        s0 = _acked(fab, b)
        time.sleep(1.0)
        pre = _rates(s0, _acked(fab, b))
        carried = sum(pre.values())
        n_bytes = int(max(carried, 1.0) / (n_flows + 1) * 1e6 / 8 * seconds)
        samples: list[tuple] = []
        done = threading.Event()
        result: dict = {}

        def go() -> None:
            try:
                result["goodput"] = _transfer_goodput(fab, max(n_bytes, 4 << 20))
            except Exception as e:  # noqa: BLE001 (reported in the row)
                result["error"] = str(e) or type(e).__name__
            finally:
                done.set()

        t = threading.Thread(target=go, daemon=True)
        t0 = time.monotonic()
        t.start()
        while not done.wait(0.25) and time.monotonic() - t0 < limit_s:
            samples.append(_acked(fab, b))
        finished = done.is_set()
        wall = time.monotonic() - t0
        mine = [s for s in samples if any(k[1] == TRANSFER_PORT for k in s[1])]
    row = {"configured_mbit": rate_mbit, "rtt_ms": rtt_ms, "competing_flows": n_flows, "shaper": impairment,
           "carried_before_mbit": carried, "transfer_bytes": max(n_bytes, 4 << 20), "transfer_wall_s": wall,
           "finished": finished, "transfer_service_mbit": result.get("goodput") if finished else None,
           "error": result.get("error") if finished else f"still running after {limit_s:g} s: measured up to then",
           "fair_share_mbit": rate_mbit / (n_flows + 1)}
    if len(mine) < 2:
        return {**row, "window_s": None, "transfer_mbit": None, "competing_mbit": [], "jain_index": None,
                "note": "the transfer ended before two samples of it: no per-flow rates"}
    r = _rates(mine[0], mine[-1])
    transfer = sum(v for k, v in r.items() if k[1] == TRANSFER_PORT)
    others = sorted((v for k, v in r.items() if k[1] != TRANSFER_PORT), reverse=True)
    total = transfer + sum(others)
    return {**row, "window_s": mine[-1][0] - mine[0][0], "transfer_mbit": transfer, "competing_mbit": others,
            "total_mbit": total, "share_of_configured": transfer / row["fair_share_mbit"],
            "share_of_carried": transfer / (total / (n_flows + 1)) if total > 0 else None,
            "jain_index": jain_index([transfer, *others])}


def contention_rows(impairment: str, *, quick: bool = False) -> list[dict]:
    return [contention_row(rate, n, impairment, seconds=2.0 if quick else 4.0)
            for rate in CONTENTION_RATES_MBIT for n in CONTENTION_FLOWS]


def run(out_dir: Path, *, quick: bool = False, only: str | None = None) -> dict:
    """All measurements, or ``only="us100"``: just the us-100 up/down next to Mininet's."""
    from testbed.doctor.qdisc import detect_impairment

    if only not in (None, "us100", "dataplane", "contention"):
        raise ValueError(f"unknown part {only!r} (known: us100, dataplane, contention)")
    impairment = detect_impairment()
    result: dict = {"impairment": impairment}
    if only is None:
        result["goodput"] = goodput_rows(seconds=2.0 if quick else 4.0)
        result["rtt"] = rtt_rows(impairment)
        result["rate_change"] = rate_change_row()
    if only in (None, "contention"):
        t0 = time.monotonic()
        result["contention"] = contention_rows(impairment, quick=quick)
        result["contention_wall_s"] = time.monotonic() - t0
        if only == "contention":
            return _write(out_dir, result, {})
    if only in (None, "dataplane") and impairment == "relay":
        from testbed.bench import relay_dataplane

        result["dataplane"] = relay_dataplane.run(seconds=3.0 if quick else 5.0)
        from testbed.netem.dataplane_capacity import cache_path, record

        # what byte_scale: auto fits relayed links to from now on (testbed.netem.dataplane_capacity)
        entry = record(result["dataplane"], command=f"testbed bench shaping{' --only ' + only if only else ''}")
        result["dataplane_capacity"] = {**entry, "cache": str(cache_path())} if entry else None
    targets: dict = {}
    if "dataplane" in result:
        from testbed.bench.relay_dataplane import targets as dataplane_targets

        targets.update(dataplane_targets(result["dataplane"]))
    if only == "dataplane":
        return _write(out_dir, result, targets)
    cmp_ = us100_comparison(impairment, repeat=1 if (quick or only) else 2)
    result["topology"] = cmp_.pop("topology")
    result["us100_vs_mininet"] = cmp_
    if only is None:
        g = [r for r in result["goodput"] if r["configured_mbit"]]
        targets["goodput_ratio_min"] = 0.94
        targets["goodput_pass"] = all(r["transfer_ratio"] >= 0.94 and (r["iperf3_ratio"] is None
                                                                        or r["iperf3_ratio"] >= 0.94) for r in g)
        targets["rtt_pass"] = all(r["within_target"] for r in result["rtt"])
        targets["rate_change_pass"] = (result["rate_change"]["replay_lag_ms"]
                                       + result["rate_change"]["netlink_call_ms"]) <= 100
    targets["topology_pass"] = (result["topology"]["up_s"] < 60 and result["topology"]["leftover_namespaces"] == 0
                                and all(x["within_target"] for x in result["topology"].get("rtt", [])))
    if "ratio_cli" in cmp_:  # without Mininet there is nothing to compare with: not a failure
        targets["us100_vs_mininet_pass"] = max(cmp_["ratio_cli"], cmp_["ratio_fabric"]) <= TOPOLOGY_RATIO_TARGET
    return _write(out_dir, result, targets)


def _write(out_dir: Path, result: dict, targets: dict) -> dict:
    result["targets"] = targets
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "shaping.json").write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    (out_dir / "shaping.md").write_text(render(result))
    return result


def _f(x, d=1):
    return "-" if x is None else f"{x:.{d}f}"


def render(r: dict) -> str:
    t = r["targets"]
    lines = ["# bench shaping", "", f"Latency/jitter/loss by: {r['impairment']}", ""]
    if "goodput" in r:
        lines += _render_shaping(r)
    if "contention" in r:
        lines += render_contention(r)
    if "dataplane" in r:
        from testbed.bench.relay_dataplane import render as render_dataplane

        lines += render_dataplane(r["dataplane"], t)
        cap = r.get("dataplane_capacity")
        lines += ([f"Relay capacity for `byte_scale: auto`: {cap['capacity_mbit']:.0f} Mbit/s per link "
                   f"({cap['rule']}), cached in {cap['cache']}", ""] if cap
                  else ["Relay capacity: no usable row, nothing cached", ""])
    if "topology" not in r:
        return "\n".join(lines)
    tp = r["topology"]
    lines += [f"## Topology {tp['topology']} (target: up in < 60 s, nothing left after teardown)", "",
              f"- {tp['sites']} sites, {tp['links']} links, {tp['relays']} relays, {tp['namespaces']} namespaces: "
              f"up in {tp['up_s']:.1f} s, down in {tp['down_s']:.1f} s, leftover namespaces {tp['leftover_namespaces']}",
              *([f"- served by {tp['relay_processes']} relay process(es); idle RTT while up: " + ", ".join(
                  f"{x['link']} {x['actual_idle_rtt_ms']:.2f} ms (configured {x['configured_rtt_ms']:g}, "
                  f"{'ok' if x['within_target'] else 'OUT of 1 ms + 5 %'})" for x in tp["rtt"])]
                if tp.get("rtt") else []),
              "", f"topology: {'PASS' if t['topology_pass'] else 'FAIL'}", ""]
    lines += _render_vs_mininet(r["us100_vs_mininet"], tp, t)
    return "\n".join(lines)


def _render_vs_mininet(c: dict, tp: dict, t: dict) -> list[str]:
    m, mb, cli = c["mininet"], c["mininet_bw"], c["cli"]
    lines = [f"## us-100 up + down next to Mininet, same machine (target: within {c['ratio_target']:g}x)", ""]
    if not m.get("available"):
        return lines + [f"- Mininet not measured: {m.get('reason')}", "", "us-100 vs Mininet: not measured", ""]
    lines += ["| what | up s | down s | total s |", "|---|---:|---:|---:|",
              f"| testbed, in-process (`Fabric.up`/`down`, {tp['relays']} relayed links, "
              f"{tp.get('relay_processes', '-')} relay processes) | {tp['up_s']:.2f} | "
              f"{tp['down_s']:.2f} | {tp['up_s'] + tp['down_s']:.2f} |",
              *([f"| testbed, in-process, one relay process per link ({pl['relay_processes']} processes) | "
                 f"{pl['up_s']:.2f} | {pl['down_s']:.2f} | {pl['up_s'] + pl['down_s']:.2f} |"]
                if (pl := c.get("topology_relay_per_link")) else []),
              f"| testbed CLI (`{cli['command_up']}`, `{cli['command_down']}`) | {cli['up_s']:.2f} | "
              f"{cli['down_s']:.2f} | {cli['up_s'] + cli['down_s']:.2f} |",
              f"| Mininet: `{m['command']}` | {m['up_s']:.2f} | {m['down_s']:.2f} | {m['up_s'] + m['down_s']:.2f} |"]
    if mb.get("available"):
        lines.append(f"| Mininet, every link shaped: `{mb['command']}` | {mb['up_s']:.2f} | {mb['down_s']:.2f} | "
                     f"{mb['up_s'] + mb['down_s']:.2f} |")
    lines += ["", f"- ratio testbed / Mininet (up + down): in-process {c['ratio_fabric']:.2f}, "
              f"CLI {c['ratio_cli']:.2f} (target <= {c['ratio_target']:g})",
              f"- Mininet timed through its Python API (build+start, stop) under its own interpreter: the same "
              f"steps as the `mn` command above, without `mn`'s clean-up-by-name on errors; fastest of "
              f"{c['repeat']} alternating round(s), kernel namespace teardown settled between measurements",
              "", f"us-100 vs Mininet: {'PASS' if t.get('us100_vs_mininet_pass') else 'FAIL'}", ""]
    return lines


def _render_shaping(r: dict) -> list[str]:
    t = r["targets"]
    lines = ["## Goodput (target: achieved / configured >= 0.94; a perfect shaper gives 1448/1514 = 0.956)", "",
             "| configured Mbit/s | transfer service Mbit/s | ratio | iperf3 Mbit/s | ratio | ideal |",
             "|---:|---:|---:|---:|---:|---:|"]
    for g in r["goodput"]:
        lines.append(f"| {_f(g['configured_mbit'], 0) if g['configured_mbit'] else 'unshaped'} | "
                     f"{_f(g['transfer_service_mbit'])} | {_f(g['transfer_ratio'], 3)} | {_f(g['iperf3_mbit'])} | "
                     f"{_f(g['iperf3_ratio'], 3)} | {g['ideal_ratio']:.3f} |")
    lines += ["", f"goodput: {'PASS' if t['goodput_pass'] else 'FAIL'}", "",
              "## RTT (target: within 1 ms + 5 %)", "", "| configured ms | measured ms | error ms | tolerance ms | ok |",
              "|---:|---:|---:|---:|---|"]
    for x in r["rtt"]:
        lines.append(f"| {x['configured_rtt_ms']:.0f} | {x['measured_rtt_ms']:.2f} | {x['error_ms']:+.2f} | "
                     f"{x['tolerance_ms']:.1f} | {'yes' if x['within_target'] else 'NO'} |")
    c = r["rate_change"]
    lines += ["", f"RTT: {'PASS' if t['rtt_pass'] else 'FAIL'}", "",
              "## In-place rate change (target: in effect within 100 ms of the trace step)", "",
              f"- {c['from_mbit']:.0f} -> {c['to_mbit']:.0f} Mbit/s: netlink call {c['netlink_call_ms']:.2f} ms, "
              f"replay lag {c['replay_lag_ms']:.2f} ms, receiver rate settled after {_f(c['receiver_settled_ms'])} ms",
              f"- {c['note']}", "", f"rate change: {'PASS' if t['rate_change_pass'] else 'FAIL'}", ""]
    return lines


def render_contention(r: dict) -> list[str]:
    rows = r["contention"]
    lines = [f"## One transfer beside competing flows ({CONTENTION_RTT_MS:g} ms RTT; shaper: {r['impairment']})", "",
             "The competing flows are the cross-traffic generator's long-lived bulk TCP flows, on a link built as "
             "a run builds one with cross-traffic; rates are bytes acknowledged per connection (`ss`) while the "
             "transfer ran. Fair share: configured / (flows + 1); of carried: what all flows together got / "
             "(flows + 1). Jain's index over the transfer and the competing flows (1: equal shares).", "",
             "| configured Mbit/s | competing flows | carried, all flows Mbit/s | transfer Mbit/s | fair share Mbit/s "
             "| transfer / fair share | transfer / share of carried | Jain's index | competing flows Mbit/s (min-max) "
             "| window s |", "|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|"]
    for x in rows:
        comp = x.get("competing_mbit") or []
        lines.append(f"| {x['configured_mbit']:.0f} | {x['competing_flows']} | {_f(x.get('total_mbit'))} | "
                     f"{_f(x.get('transfer_mbit'))} | {x['fair_share_mbit']:.1f} | {_f(x.get('share_of_configured'), 2)} "
                     f"| {_f(x.get('share_of_carried'), 2)} | {_f(x.get('jain_index'), 3)} | "
                     f"{(_f(min(comp)) + '-' + _f(max(comp))) if comp else '-'} | {_f(x.get('window_s'))} |")
    for x in rows:
        if x.get("error") or x.get("note"):
            lines.append(f"- {x['configured_mbit']:.0f} Mbit/s, {x['competing_flows']} flows: "
                         f"{x.get('error') or x.get('note')}")
    lines += [""]
    if r["impairment"] != "netem":
        lines += ["netem: not measured here (this kernel has no netem qdisc; the rows above are the delay relay's). "
                  "netem against the relay: `testbed vm test` records them in the qemu guest, at 20 Mbit/s.", ""]
    if "contention_wall_s" in r:
        lines += [f"These rows took {r['contention_wall_s']:.0f} s.", ""]
    return lines
