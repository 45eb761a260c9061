"""Delay data planes side by side: the compiled relay (:mod:`testbed.netem.relay.fastrelay`), the Python
relay (:mod:`testbed.netem.relay.relay`) and an unshaped veth (the ceiling, measured again right before
each case: on a shared machine the ratio to it is what compares), measured with iperf3.

Per (rate, one-way delay): iperf3 TCP goodput through the link and its ratio to the configured rate,
the idle RTT (median TCP handshake) against the configured RTT (target: within 1 ms + 5 %), and
iperf3's mean RTT under load (includes the queue the shaper builds). With loss: iperf3 UDP at
half the rate and the loss it measured beside the configured loss (target: within 0.3 points).

Goodput is TCP's steady state: iperf3 leaves out the first seconds (``startup_omit_s``: the sender
needs ~12 round trips to grow its window to 10 Gbit/s x 50 ms, about a second in which it carries
half the rate); the goodput including them is reported beside it. Each row also records the load
average when it was measured and, for the compiled relay, the share of the run its processes ran and
waited on a run queue (``/proc/PID/schedstat``): a relay that waits falls behind and queues frames.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import subprocess
import time
from collections.abc import Iterator

from testbed.bench.shaping import UNSHAPED_MBIT, _pair, handshake_rtt_ms
from testbed.link import rtt_ms
from testbed.netem.relay.fastrelay import RELAY_ENV
from testbed.netem.relay.fastrelay import available as fast_available
from testbed.netem import tcp_cc
from testbed.netem.nsexec import in_netns, spawn
from testbed.netem.tcp_cc import DEFAULT as DEFAULT_TCP_CC

IMPLEMENTATIONS = ("fast", "python")
RTT_TOL_MS, RTT_TOL_FRAC, LOSS_TOL_POINTS, GOODPUT_TARGET = 1.0, 0.05, 0.3, 0.94
DEFAULT_CASES = ((1000.0, 10.0), (5000.0, 25.0), (10000.0, 25.0), (10000.0, 50.0), (1000.0, 100.0))
# seconds measured (after the start-up) at 10 Gbit/s and above: a user's iperf3 -t 10 (bbr enters ProbeRTT
# every 10 s, so a shorter run could miss its cost); and the case run again with the sites on bbr
LONG_TCP_S, BBR_CASE = 10.0, (10000.0, 25.0)
# TCP through a lossy link: at 3 Gbit/s configured (goodput against the most it can be), and at 10 Gbit/s
# (what the data plane carries with per-packet loss; target: >= LOSSY_TARGET_MBIT)
LOSSY_RATES_MBIT, LOSSY_TARGET_MBIT = (3000.0, 10000.0), 3000.0
# TCP through a jittered link (rate Mbit/s, one-way delay ms, jitter ms): the compiled relay in GSO mode (a delay
# draw per segment) beside the Python relay in frame mode (a draw per frame, the reference)
JITTER_CASE = (3000.0, 25.0, 5.0)
# TCP payload per Ethernet frame the tbf counts (1500-byte MTU, timestamps on): 1448 of 1514 bytes
PAYLOAD_SHARE = 1448 / 1514


@contextlib.contextmanager
def _relay_impl(impl: str) -> Iterator[None]:
    old = os.environ.get(RELAY_ENV)
    os.environ[RELAY_ENV] = "python" if impl == "python" else "fast"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(RELAY_ENV, None)
        else:
            os.environ[RELAY_ENV] = old


def startup_omit_s(rtt_ms: float) -> int:
    """Seconds of a TCP run left out as start-up: 20 round trips, whole seconds, 1-4."""
    return min(4, max(1, math.ceil(20 * rtt_ms / 1000)))


def _iperf3(fab, seconds: float, *, udp_mbit: float | None = None, port: int = 5301, omit_s: int = 0) -> dict | None:
    exe = shutil.which("iperf3")
    if exe is None:
        return None
    server = spawn(fab.site_ns("b"), [exe, "-s", "-1", "-B", fab.site_addr("b"), "-p", str(port)],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        cmd = [exe, "-c", fab.site_addr("b"), "-p", str(port), "-t", str(seconds), "-J"]
        if omit_s:
            cmd += ["-O", str(omit_s)]
        if udp_mbit:
            cmd += ["-u", "-b", f"{udp_mbit}M", "-l", "1400", "-w", "16M"]  # big buffers: the receiver drops nothing
        client = spawn(fab.site_ns("a"), cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        out, _ = client.communicate(timeout=seconds + omit_s + 60)
        return json.loads(out)
    finally:
        if server.poll() is None:
            server.terminate()
        server.wait(timeout=5)


def gso_max_bytes(fab) -> int | None:
    """The largest IPv4 super-frame the sending site may hand its link (64 KiB, or more with BIG TCP:
    :mod:`testbed.netem.bigtcp`); None where the kernel does not say."""
    from testbed.netem import bigtcp

    link = fab.plan.links[0]
    with in_netns(fab.plan.site(link.a).ns):
        return bigtcp.get_sizes(link.if_a).get("gso_ipv4_max_size")


def _schedstat(pids) -> dict[int, tuple[int, int]]:
    """ns each process ran and waited on a run queue so far (``/proc/PID/schedstat``)."""
    out = {}
    for pid in pids:
        with contextlib.suppress(OSError, ValueError), open(f"/proc/{pid}/schedstat") as f:
            run, wait = f.read().split()[:2]
            out[pid] = (int(run), int(wait))
    return out


def relay_sched_shares(before: dict, after: dict, wall_s: float) -> tuple[float | None, float | None]:
    """(ran, waited on a run queue) as shares of ``wall_s``, summed over the relay processes seen both
    times; (None, None) without any."""
    pids = before.keys() & after.keys()
    if not pids or wall_s <= 0:
        return None, None
    ran = sum(after[p][0] - before[p][0] for p in pids) / 1e9 / wall_s
    waited = sum(after[p][1] - before[p][1] for p in pids) / 1e9 / wall_s
    return ran, waited


def goodput_with_startup_mbit(data: dict | None) -> float | None:
    """The sender's mean rate over every interval iperf3 reported, the omitted start-up included."""
    iv = [i.get("sum", {}) for i in (data or {}).get("intervals", [])]
    secs = sum(x.get("seconds", 0) for x in iv)
    return sum(x.get("bytes", 0) for x in iv) * 8 / secs / 1e6 if secs > 0 else None


def tcp_row(impl: str, rate_mbit: float, delay_ms: float, seconds: float = 5.0, *,
            tcp_congestion: str = DEFAULT_TCP_CC) -> dict:
    """iperf3 TCP goodput (steady state, start-up left out) and RTTs through one link built by
    ``impl`` ("fast", "python" or "unshaped"), the sites' TCP congestion control ``tcp_congestion``."""
    unshaped = impl == "unshaped"
    rtt = rtt_ms(delay_ms)
    omit = startup_omit_s(0.0 if unshaped else rtt)
    with _relay_impl("python" if impl == "python" else "fast"):
        with _pair(UNSHAPED_MBIT if unshaped else rate_mbit, 0.0 if unshaped else delay_ms,
                   "none" if unshaped else "relay", tcp_congestion=tcp_congestion) as fab:
            idle_rtt = handshake_rtt_ms(fab, n=20)
            gso_bytes = gso_max_bytes(fab)
            pids = set(fab.relay_pids().values()) if impl == "fast" else set()
            s0, t0 = _schedstat(pids), time.monotonic()
            data = _iperf3(fab, seconds, omit_s=omit)
            ran, waited = relay_sched_shares(s0, _schedstat(pids), time.monotonic() - t0)
            load = os.getloadavg()[0]
    goodput = data["end"]["sum_received"]["bits_per_second"] / 1e6 if data else None
    stream = (data or {}).get("end", {}).get("streams", [{}])[0].get("sender", {})
    row = {"implementation": impl, "tcp_congestion": tcp_cc.effective(tcp_congestion),
           "configured_mbit": None if unshaped else rate_mbit,
           "configured_rtt_ms": None if unshaped else rtt, "actual_goodput_mbit": goodput,
           "goodput_ratio": goodput / rate_mbit if (goodput and not unshaped) else None,
           "startup_omitted_s": omit, "actual_goodput_with_startup_mbit": goodput_with_startup_mbit(data),
           "actual_idle_rtt_ms": idle_rtt, "actual_loaded_mean_rtt_ms": stream.get("mean_rtt", 0) / 1000 or None,
           "retransmits": stream.get("retransmits"), "gso_max_bytes": gso_bytes, "load_avg_1m": load,
           "actual_relay_ran_share": ran, "actual_relay_runqueue_wait_share": waited}
    if not unshaped:
        row["rtt_within_target"] = abs(idle_rtt - rtt) <= RTT_TOL_MS + RTT_TOL_FRAC * rtt
    return row


def loss_row(impl: str, rate_mbit: float = 1000.0, loss_pct: float = 1.0, delay_ms: float = 5.0,
             seconds: float = 5.0) -> dict:
    """iperf3 UDP at a twentieth of ``rate_mbit`` (a rate the receiving iperf3 keeps up with on a busy
    machine, so what it counts lost is the link's loss; the loss is per packet, whatever the rate)
    through a link with ``loss_pct`` per-packet loss."""
    offered = rate_mbit / 20
    with _relay_impl(impl), _pair(rate_mbit, delay_ms, "relay", loss_pct=loss_pct) as fab:
        data = _iperf3(fab, seconds, udp_mbit=offered)
    s = (data or {}).get("end", {}).get("sum", {})
    measured = s.get("lost_percent")
    return {"implementation": impl, "configured_mbit": rate_mbit, "configured_loss_pct": loss_pct,
            "offered_mbit": offered, "actual_loss_pct": measured,
            "actual_received_mbit": s.get("bits_per_second", 0) / 1e6 or None,
            "loss_within_target": measured is not None and abs(measured - loss_pct) <= LOSS_TOL_POINTS}


def max_lossy_goodput_ratio(loss_pct: float) -> float:
    """The most TCP goodput can be of a link's configured rate with ``loss_pct`` per-packet loss: the
    tbf counts whole frames, headers included, and the lost ones are sent again within the rate."""
    return PAYLOAD_SHARE * (1 - loss_pct / 100)


def impaired_link_congestion_control() -> str:
    """The sites' congestion control for TCP rows through lossy or jittered links: bbr where the kernel
    has it, else the default. bbr neither takes random loss for congestion nor leaves slow start early on
    jittered RTTs, so what TCP carries is what the data plane carries; cubic is held far below the link
    by TCP itself (to about MSS/RTT x 1.22/sqrt(p) with loss p: 19 Mbit/s through 3 Gbit/s, 4 ms, 1 %;
    HyStart took 25 +- 5 ms of jitter for a full queue: 251 Mbit/s through 3 Gbit/s)."""
    return "bbr" if "bbr" in tcp_cc.available() else DEFAULT_TCP_CC


def lossy_tcp_row(impl: str, rate_mbit: float = 3000.0, loss_pct: float = 1.0, delay_ms: float = 5.0,
                  seconds: float = 5.0, tcp_congestion: str | None = None) -> dict:
    """iperf3 TCP through a link with ``loss_pct`` per-packet loss: goodput, and the share of the
    sender's segments it retransmitted (about the configured loss when the relay drops single
    packets, also out of GSO super-frames). The sites use ``tcp_congestion`` (default:
    :func:`impaired_link_congestion_control`)."""
    from testbed.netem.fabric import relay_gso

    cc = tcp_congestion or impaired_link_congestion_control()
    with _relay_impl(impl), _pair(rate_mbit, delay_ms, "relay", loss_pct=loss_pct, tcp_congestion=cc) as fab:
        mode = "gso" if relay_gso(fab.plan.links[0]) else "frame"
        data = _iperf3(fab, seconds, omit_s=startup_omit_s(rtt_ms(delay_ms)))
        load = os.getloadavg()[0]
    end = (data or {}).get("end", {})
    sender = end.get("streams", [{}])[0].get("sender", {})
    goodput = end.get("sum_received", {}).get("bits_per_second", 0) / 1e6 or None
    segments = sender.get("bytes", 0) / 1448
    retr = sender.get("retransmits")
    return {"implementation": impl, "mode": mode, "tcp_congestion": tcp_cc.effective(cc),
            "configured_mbit": rate_mbit, "configured_loss_pct": loss_pct,
            "configured_rtt_ms": rtt_ms(delay_ms), "actual_goodput_mbit": goodput,
            "goodput_ratio": goodput / rate_mbit if goodput else None,
            "max_goodput_ratio": max_lossy_goodput_ratio(loss_pct),
            "actual_retransmitted_pct": 100 * retr / segments if (retr is not None and segments) else None,
            "load_avg_1m": load}


def _ping_rtts_ms(fab, seconds: float, interval_s: float = 0.002) -> list[float]:
    """RTTs of pings from site a to site b every ``interval_s`` (root: any interval) for ``seconds`` (a
    deadline, not a count: on a busy machine ping sends more slowly than asked and would outlast the load)."""
    exe = shutil.which("ping")
    if exe is None:
        return []
    proc = spawn(fab.site_ns("a"), [exe, "-n", "-i", str(interval_s), "-w", str(max(1, int(seconds))), "-W", "1",
                                    fab.site_addr("b")], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out, _ = proc.communicate(timeout=seconds + 30)
    return [float(tok.split("=", 1)[1]) for line in out.decode().splitlines() for tok in line.split()
            if tok.startswith("time=")]


def _quantiles(xs: list[float]) -> dict:
    if not xs:
        return {}
    xs = sorted(xs)
    q = {f"p{int(p * 100)}": xs[min(len(xs) - 1, int(p * len(xs)))] for p in (0.05, 0.5, 0.95)}
    mean = sum(xs) / len(xs)
    return {**q, "mean": mean, "std": (sum((x - mean) ** 2 for x in xs) / len(xs)) ** 0.5, "n": len(xs)}


@contextlib.contextmanager
def _gso_above(mbit: float | None) -> Iterator[None]:
    """Frame mode up to ``mbit`` for the links made inside (None: the fabric's own threshold)."""
    from testbed.netem import fabric

    old = fabric.RELAY_GSO_ABOVE_MBIT
    if mbit is not None:
        fabric.RELAY_GSO_ABOVE_MBIT = mbit
    try:
        yield
    finally:
        fabric.RELAY_GSO_ABOVE_MBIT = old


def jitter_row(impl: str, rate_mbit: float, delay_ms: float = 25.0, jitter_ms: float = 5.0, seconds: float = 5.0,
               frame_mode: bool = False, tcp_congestion: str | None = None) -> dict:
    """iperf3 TCP through a link with ``jitter_ms`` (std-dev) of jitter each way, pings every 2 ms
    beside it: goodput, and the spread of the pings' RTTs (each ping a single packet, delayed like the
    segments around it, never before them). The compiled relay also reports the spread of the delays
    it scheduled, per packet (each segment of a super-frame counted once). ``frame_mode``: the relay
    reads single frames (offloads off) whatever the rate."""
    import threading

    import psutil

    from testbed.netem.fabric import relay_gso

    cc = tcp_congestion or impaired_link_congestion_control()
    pings: list[float] = []
    relay_delay = None
    with _relay_impl(impl), _gso_above(1e9 if frame_mode else None), \
            _pair(rate_mbit, delay_ms, "relay", jitter_ms=jitter_ms, tcp_congestion=cc) as fab:
        mode = "gso" if relay_gso(fab.plan.links[0]) else "frame"
        omit = startup_omit_s(rtt_ms(delay_ms + 2 * jitter_ms))

        def ping() -> None:  # while TCP is in its steady state (start-up left out), and stopped before it ends
            time.sleep(omit + 0.5)
            pings.extend(_ping_rtts_ms(fab, max(1.0, seconds - 1.5)))

        pids = set(fab.relay_pids().values()) if impl == "fast" else set()
        th = threading.Thread(target=ping)
        th.start()
        s0, t0 = _schedstat(pids), time.monotonic()
        data = _iperf3(fab, seconds, omit_s=omit)
        ran, waited = relay_sched_shares(s0, _schedstat(pids), time.monotonic() - t0)
        th.join()
        load = os.getloadavg()[0]
        if impl == "fast":  # the relay writes its stats when it stops
            for pid in set(fab.relay_pids().values()):
                with contextlib.suppress(psutil.Error):
                    p = psutil.Process(pid)
                    p.terminate()
                    p.wait(5)
            with contextlib.suppress(OSError, ValueError):
                with open(os.path.join(fab._tmp, f"relay-{fab.plan.links[0].index}.json")) as f:
                    st = json.load(f)
                relay_delay = st.get("delay_ms", {}).get("a_to_b")
                relay_delay = {**relay_delay, "gso_split": st["a_to_b"].get("gso_split")} if relay_delay else None
    end = (data or {}).get("end", {})
    goodput = end.get("sum_received", {}).get("bits_per_second", 0) / 1e6 or None
    sender = end.get("streams", [{}])[0].get("sender", {})
    return {"implementation": impl, "mode": mode, "tcp_congestion": tcp_cc.effective(cc),
            "configured_mbit": rate_mbit, "configured_delay_ms": delay_ms,
            "configured_jitter_ms": jitter_ms, "actual_goodput_mbit": goodput,
            "goodput_ratio": goodput / rate_mbit if goodput else None, "retransmits": sender.get("retransmits"),
            "actual_ping_rtt_ms": _quantiles(pings), "actual_relay_delay_ab_ms": relay_delay, "load_avg_1m": load,
            "actual_relay_ran_share": ran, "actual_relay_runqueue_wait_share": waited}


def run(cases=DEFAULT_CASES, seconds: float = 5.0) -> dict:
    """Per case, an unshaped veth right before the relays (the ceiling at that moment: the machine is
    shared, so each relay row's ``ratio_to_unshaped`` compares measurements taken side by side).
    Rows at 10 Gbit/s and above run ``LONG_TCP_S`` (a user's iperf3 -t 10; bbr's ProbeRTT comes every
    10 s); the last row is the 10 Gbit/s, 25 ms link with the sites on bbr instead of cubic."""
    impls = [i for i in IMPLEMENTATIONS if i != "fast" or fast_available()]
    tcp = []
    for rate, delay in cases:
        secs = max(seconds, LONG_TCP_S) if rate >= 10000.0 else seconds
        ceiling = tcp_row("unshaped", 0.0, 0.0, seconds)
        tcp.append(ceiling)
        for impl in impls:
            row = tcp_row(impl, rate, delay, secs)
            u, g = ceiling["actual_goodput_mbit"], row["actual_goodput_mbit"]
            row["unshaped_goodput_mbit"] = u
            row["ratio_to_unshaped"] = g / u if (g and u) else None
            tcp.append(row)
    if "bbr" in tcp_cc.available():
        rate, delay = BBR_CASE
        tcp.append(tcp_row(impls[0], rate, delay, max(seconds, LONG_TCP_S), tcp_congestion="bbr"))
    loss = [loss_row(impl, seconds=seconds) for impl in impls]
    lossy_tcp = [lossy_tcp_row(impl, rate_mbit=rate, seconds=seconds) for rate in LOSSY_RATES_MBIT for impl in impls]
    rate, delay, jitter = JITTER_CASE
    jittered = [jitter_row(impl, rate, delay, jitter, seconds=seconds, frame_mode=impl == "python") for impl in impls]
    return {"fast_relay_built": fast_available(), "tcp": tcp, "loss": loss, "lossy_tcp": lossy_tcp,
            "jitter": jittered}


def targets(r: dict) -> dict:
    """Pass/fail of the compiled relay against the targets (10 Gbit/s at 25 ms one-way: goodput >= 0.94 x
    configured; every idle RTT within 1 ms + 5 %; 1 % loss measured within 0.3 points; TCP through a
    link with 1 % loss carries >= 3 Gbit/s). Without the compiled relay the Python relay's rows are judged."""
    impl = "fast" if r["fast_relay_built"] else "python"
    tcp = [x for x in r["tcp"] if x["implementation"] == impl]
    # goodput judged with the sites' default congestion control (bbr's own pauses are the sender's, not the link's)
    ten = [x for x in tcp if x["configured_mbit"] == 10000.0 and x["configured_rtt_ms"] == 50.0
           and x.get("tcp_congestion", DEFAULT_TCP_CC) == DEFAULT_TCP_CC]
    return {"dataplane_10g_goodput_pass": bool(ten) and all((x["goodput_ratio"] or 0) >= GOODPUT_TARGET for x in ten),
            "dataplane_rtt_pass": all(x["rtt_within_target"] for x in tcp),
            "dataplane_loss_pass": all(x["loss_within_target"] for x in r["loss"] if x["implementation"] == impl),
            "dataplane_lossy_3g_pass": any((x["actual_goodput_mbit"] or 0) >= LOSSY_TARGET_MBIT
                                           for x in r.get("lossy_tcp", []) if x["implementation"] == impl)}


def render(r: dict, t: dict | None = None) -> list[str]:
    def f(x, d=1):
        return "-" if x is None else (f"{x:.{d}f}" if isinstance(x, float) else str(x))

    gso = {x["implementation"]: x["gso_max_bytes"] for x in r["tcp"]
           if x.get("gso_max_bytes") and x["implementation"] != "unshaped"}
    out = ["", "### Delay data plane: compiled relay vs Python relay vs unshaped veth (iperf3)", "",
           f"compiled relay built: {r['fast_relay_built']}"
           + ("; largest super-frame a site sends (IPv4 GSO max size, bytes): "
              + ", ".join(f"{k} {v}" for k, v in sorted(gso.items())) if gso else ""), "",
           "goodput: steady state (the first seconds, TCP's start-up, left out); with start-up: the sender's "
           "mean over the whole run; relay ran / waited: share of the run the compiled relay processes ran and "
           "waited on a run queue; TCP cc: the sites' congestion control (bbr, v1, drops its window to 4 packets "
           "for 200 ms whenever it has not seen its minimum RTT again for 10 s: about 2.5 % of a long fat link's "
           "goodput, a pause of the sender, not of the link)", "",
           "| relay | TCP cc | configured Mbit/s | RTT ms | goodput Mbit/s | ratio | vs unshaped just before | "
           "idle RTT ms | loaded RTT ms | RTT in target | retransmits | with start-up Mbit/s (omitted s) | load 1 min | "
           "relay ran / waited |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in r["tcp"]:
        ran, waited = row.get("actual_relay_ran_share"), row.get("actual_relay_runqueue_wait_share")
        out.append(f"| {row['implementation']} | {row.get('tcp_congestion') or '-'} | {f(row['configured_mbit'], 0)} | "
                   f"{f(row['configured_rtt_ms'], 0)} | "
                   f"{f(row['actual_goodput_mbit'], 0)} | {f(row['goodput_ratio'], 3)} | "
                   f"{f(row.get('ratio_to_unshaped'), 3)} | "
                   f"{f(row['actual_idle_rtt_ms'], 2)} | {f(row['actual_loaded_mean_rtt_ms'], 1)} | "
                   f"{f(row.get('rtt_within_target'))} | {f(row['retransmits'])} | "
                   f"{f(row.get('actual_goodput_with_startup_mbit'), 0)} ({f(row.get('startup_omitted_s'))}) | "
                   f"{f(row.get('load_avg_1m'), 1)} | "
                   f"{'-' if ran is None else f'{ran:.2f} / {waited:.2f}'} |")
    out += ["", "| relay | configured loss % | offered Mbit/s (UDP) | measured loss % | within 0.3 points |",
            "|---|---|---|---|---|"]
    for row in r["loss"]:
        out.append(f"| {row['implementation']} | {f(row['configured_loss_pct'])} | {f(row['offered_mbit'], 0)} | "
                   f"{f(row['actual_loss_pct'], 2)} | {f(row['loss_within_target'])} |")
    if r.get("lossy_tcp"):
        out += ["", "most: the largest ratio TCP can reach (payload share of each frame, less the loss); here and "
                "through the jittered link below, the sites on bbr where the kernel has it: cubic backs off on "
                "random loss and leaves slow start early on jittered RTTs, held far below the link by TCP itself", "",
                "| relay | mode | TCP cc | configured Mbit/s | loss % | RTT ms | TCP goodput Mbit/s | ratio | "
                "segments retransmitted % | most | load 1 min |", "|---|---|---|---|---|---|---|---|---|---|---|"]
        for row in r["lossy_tcp"]:
            out.append(f"| {row['implementation']} | {row['mode']} | {row.get('tcp_congestion') or '-'} | "
                       f"{f(row['configured_mbit'], 0)} | "
                       f"{f(row['configured_loss_pct'])} | {f(row['configured_rtt_ms'], 0)} | "
                       f"{f(row['actual_goodput_mbit'], 0)} | {f(row['goodput_ratio'], 3)} | "
                       f"{f(row['actual_retransmitted_pct'], 2)} | {f(row.get('max_goodput_ratio'), 3)} | "
                       f"{f(row.get('load_avg_1m'), 1)} |")
    if r.get("jitter"):
        out += ["", "TCP through a jittered link, pings every 2 ms beside it (their RTTs include the shaper's queue); "
                "the compiled relay's scheduled one-way delay per packet (a to b, each segment of a super-frame "
                "counted once)", "",
                "| relay | mode | TCP cc | configured Mbit/s | delay +- jitter ms | TCP goodput Mbit/s | ratio | "
                "retransmits | ping RTT p5 / p50 / p95 (std) ms | relay delay p1 / p50 / p99 (std) ms | load 1 min |",
                "|---|---|---|---|---|---|---|---|---|---|---|"]
        for row in r["jitter"]:
            p, d = row.get("actual_ping_rtt_ms") or {}, row.get("actual_relay_delay_ab_ms") or {}
            ping = (f"{f(p['p5'])} / {f(p['p50'])} / {f(p['p95'])} ({f(p['std'])})" if p else "-")
            sched = (f"{f(d['p1'])} / {f(d['p50'])} / {f(d['p99'])} ({f(d['std'])})" if d.get("p1") else "-")
            out.append(f"| {row['implementation']} | {row['mode']} | {row.get('tcp_congestion') or '-'} | "
                       f"{f(row['configured_mbit'], 0)} | "
                       f"{f(row['configured_delay_ms'], 0)} +- {f(row['configured_jitter_ms'], 0)} | "
                       f"{f(row['actual_goodput_mbit'], 0)} | {f(row['goodput_ratio'], 3)} | {f(row['retransmits'])} | "
                       f"{ping} | {sched} | {f(row.get('load_avg_1m'), 1)} |")
    if t:
        out += [""] + [f"{k}: {'PASS' if v else 'FAIL'}" for k, v in t.items() if k.startswith("dataplane_")]
    return out + [""]
