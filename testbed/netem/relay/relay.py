"""Delay relay: latency, jitter and loss on a link without ``sch_netem``.

The kernel here has no netem (and no ``fq``, so eBPF departure times are ignored). A link is
therefore ``site A --veth-- [relay namespace R: ra, rb] --veth-- site B``: this module runs in R,
reads every Ethernet frame (ARP included) from one interface with an ``AF_PACKET`` socket, holds
it for the configured one-way delay and writes it unchanged to the other interface. A and B share
one subnet and see each other as directly connected. Bandwidth is shaped elsewhere (tbf/htb on the
site-side egress); the relay only delays, jitters and drops.

Semantics, per direction, per frame (differences from netem are deliberate and listed):

* delay: ``d = delay_ms + N(0, jitter_ms)`` clamped at 0 (netem's default jitter is uniform over
  +-jitter; ``distribution normal`` is the analogue of this). The clamp shifts the mean up when
  jitter is comparable to the delay.
* order: release time = ``max(previous release in that direction, arrival + d)``. Frames are
  never reordered (netem with jitter reorders, which TCP reads as loss). At packet rates above
  ~1/jitter the effective delay therefore tends to the running maximum of recent samples: a bulk
  flow sees more than ``delay_ms`` of mean delay and less variance than a sparse probe stream.
* loss: independent Bernoulli(``loss_pct``/100) per frame (no correlation/Gilbert model).
* the loss and jitter draws come from two ``random.Random`` streams per direction seeded from
  ``seed``: the same seed reproduces the same drop pattern whatever the jitter setting.
* a userspace queue holds at most ``queue_limit_frames`` frames per direction (tail drop beyond).

Two modes:

* frame mode (default): one unit = one wire frame (<= MTU). Needs offloads off on the link
  (:func:`testbed.netem.offload.set_offloads`); a larger frame is counted ``dropped_oversize``.
  ~10 us of CPU a frame (Python, plus the receiver's stack, which runs inside the relay's send):
  ~0.6-0.75 Gbit/s of TCP through one relay here.
* GSO mode (``gso=True``): ``PACKET_VNET_HDR`` carries the GSO/checksum metadata across the
  relay, so offloads may stay on and a unit is a super-frame of up to 64 KB: several Gbit/s. Delay
  and jitter apply per super-frame; per-packet loss cannot be expressed, so loss must be 0.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import ctypes
import errno
import fcntl
import json
import math
import os
import random
import resource
import select
import signal
import socket
import struct
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_STATISTICS = 6
PACKET_VNET_HDR = 15
PACKET_IGNORE_OUTGOING = 23
SO_SNDBUFFORCE, SO_RCVBUFFORCE = 32, 33
SIOCGIFMTU = 0x8921
PR_SET_TIMERSLACK = 29

SOCKET_BUF_BYTES = 32 * 1024 * 1024
DEFAULT_QUEUE_LIMIT_FRAMES = 50_000  # covers 600 Mbit/s x 1 s of delay; ~75 MB at most
DRAIN_BATCH = 256
GSO_FRAME_BYTES = 256 * 1024  # virtio_net_hdr + the largest GSO skb (64 KB without BIG TCP)
MAX_WAIT_S = 0.05  # longest sleep: bounds the reaction time to stop / SIGTERM
RETRY_WAIT_NS = 200_000  # retry after a full transmit queue (ENOBUFS/EAGAIN)
_RETRY_ERRNOS = {errno.ENOBUFS, errno.EAGAIN, errno.EWOULDBLOCK}


@dataclass(frozen=True)
class PathImpairment:
    """One direction of a link: one-way delay, jitter (std-dev of a normal) and loss, per frame."""

    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    loss_pct: float = 0.0

    def __post_init__(self) -> None:
        for name in ("delay_ms", "jitter_ms", "loss_pct"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"PathImpairment.{name} must be a number, got {value!r}")
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"PathImpairment.{name} must be finite and >= 0, got {value!r}")
        if self.loss_pct > 100:
            raise ValueError(f"PathImpairment.loss_pct must be <= 100, got {self.loss_pct!r}")

    @property
    def delay_ns(self) -> int:
        return round(self.delay_ms * 1e6)

    @property
    def jitter_ns(self) -> float:
        return self.jitter_ms * 1e6


class DirectionSchedule:
    """Pure release-time schedule of one direction: ``admit(arrival_ns)`` -> release time, or None
    when the frame is lost. Order-preserving: release times never decrease."""

    __slots__ = ("_delay_ns", "_jitter_ns", "_loss_p", "_loss_rng", "_jitter_rng", "last_release_ns")

    def __init__(self, imp: PathImpairment, seed: int, direction: str) -> None:
        self._delay_ns = imp.delay_ns
        self._jitter_ns = imp.jitter_ns
        self._loss_p = imp.loss_pct / 100.0
        self._loss_rng = random.Random(f"relay-loss:{seed}:{direction}")
        self._jitter_rng = random.Random(f"relay-jitter:{seed}:{direction}")
        self.last_release_ns = 0

    def update(self, imp: PathImpairment) -> None:
        """New delay, jitter and loss from the next frame on (a live change: frames already held keep
        their release times; the random streams continue)."""
        self._delay_ns, self._jitter_ns, self._loss_p = imp.delay_ns, imp.jitter_ns, imp.loss_pct / 100.0

    def admit(self, arrival_ns: int) -> int | None:
        if self._loss_p and self._loss_rng.random() < self._loss_p:
            return None
        delay = self._delay_ns
        if self._jitter_ns:
            delay = max(0, round(delay + self._jitter_rng.gauss(0.0, self._jitter_ns)))
        release = arrival_ns + delay
        if release < self.last_release_ns:
            release = self.last_release_ns
        self.last_release_ns = release
        return release


def schedule(arrivals_ns: list[int], imp: PathImpairment, *, seed: int = 0, direction: str = "ab") -> list[int | None]:
    """Release times the relay would give frames arriving at ``arrivals_ns`` (None = lost)."""
    sched = DirectionSchedule(imp, seed, direction)
    return [sched.admit(t) for t in arrivals_ns]


@dataclass
class DirectionStats:
    frames_in: int = 0
    bytes_in: int = 0
    frames_out: int = 0
    bytes_out: int = 0
    dropped_loss: int = 0
    dropped_overflow: int = 0
    dropped_oversize: int = 0  # frame larger than MTU buffer: an offload is still on
    tx_errors: int = 0
    rx_errors: int = 0
    kernel_drops: int = 0  # socket receive buffer overruns (PACKET_STATISTICS)
    max_queue_frames: int = 0
    queued_at_exit: int = 0  # held frames discarded when the relay stopped


@dataclass
class RelayStats:
    if_a: str
    if_b: str
    mode: str = "frame"
    seed: int = 0
    impairments: dict = field(default_factory=dict)
    a_to_b: DirectionStats = field(default_factory=DirectionStats)
    b_to_a: DirectionStats = field(default_factory=DirectionStats)
    duration_s: float = 0.0
    cpu_s: float = 0.0

    def write(self, path: str) -> None:
        tmp = f"{path}.tmp{os.getpid()}"  # atomic: a reader never sees half a file
        Path(tmp).write_text(json.dumps(asdict(self), indent=2) + "\n")
        os.replace(tmp, path)


def interface_mtu(ifname: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = struct.pack("16si", ifname.encode(), 0)
        return struct.unpack("16si", fcntl.ioctl(s.fileno(), SIOCGIFMTU, req))[1]


def open_packet_socket(ifname: str, *, vnet_hdr: bool = False, buf_bytes: int = SOCKET_BUF_BYTES) -> socket.socket:
    """Raw socket on one interface, all protocols, blind to its own transmissions, non-blocking.

    Created with protocol 0 and bound with ETH_P_ALL, so it never sees frames of other interfaces.
    No PACKET_QDISC_BYPASS: a qdisc someone puts on the relay's veths is honoured."""
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    try:
        sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
        if vnet_hdr:
            sock.setsockopt(SOL_PACKET, PACKET_VNET_HDR, 1)
        for force, plain in ((SO_RCVBUFFORCE, socket.SO_RCVBUF), (SO_SNDBUFFORCE, socket.SO_SNDBUF)):
            try:
                sock.setsockopt(socket.SOL_SOCKET, force, buf_bytes)
            except PermissionError:
                sock.setsockopt(socket.SOL_SOCKET, plain, buf_bytes)
        sock.bind((ifname, ETH_P_ALL))
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def _kernel_drops(sock: socket.socket) -> int:
    """Frames the kernel dropped on this socket since the last call (reading resets the counter)."""
    _packets, drops = struct.unpack("II", sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8))
    return drops


def _set_timer_slack_ns(ns: int) -> None:
    """Wake-ups within ``ns`` of the deadline (default slack is 50 us; not Linux: keep it)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_TIMERSLACK, ctypes.c_ulong(ns), 0, 0, 0)


class _Direction:
    """One direction's live state: input socket, output socket, schedule, FIFO and counters."""

    def __init__(self, sock_in, sock_out, sched: DirectionSchedule, stats: DirectionStats,
                 frame_bytes: int, queue_limit: int) -> None:
        self.sock_in, self.sock_out, self.sched, self.stats = sock_in, sock_out, sched, stats
        self.frame_bytes = frame_bytes  # receive size; a frame this long was truncated
        self.queue: collections.deque[tuple[int, bytes]] = collections.deque()
        self.queue_limit = queue_limit

    def drain(self, now_ns: int) -> None:
        """Read up to DRAIN_BATCH waiting frames, all stamped ``now_ns``, and queue the survivors."""
        recv, size = self.sock_in.recv, self.frame_bytes
        admit, queue, st = self.sched.admit, self.queue, self.stats
        for _ in range(DRAIN_BATCH):
            try:
                frame = recv(size)  # ~10% cheaper than recv_into(MSG_TRUNC) + copy
            except BlockingIOError:
                break
            except OSError:  # ENETDOWN once after the interface went down: it resumes when up
                st.rx_errors += 1
                break
            n = len(frame)
            st.frames_in += 1
            st.bytes_in += n
            if n >= size:  # filled the buffer: truncated (size is MTU + 64 bytes in frame mode)
                if not st.dropped_oversize:
                    print(f"relay: frame of >= {size} bytes: an offload (TSO/GRO) is on; "
                          "see testbed.netem.offload", file=sys.stderr, flush=True)
                st.dropped_oversize += 1
                continue
            release = admit(now_ns)
            if release is None:
                st.dropped_loss += 1
            elif len(queue) >= self.queue_limit:
                st.dropped_overflow += 1
            else:
                queue.append((release, frame))
        if len(queue) > st.max_queue_frames:
            st.max_queue_frames = len(queue)

    def release(self, now_ns: int) -> int | None:
        """Send every frame due by ``now_ns``; return when the next one is due (None if empty)."""
        queue, send, st = self.queue, self.sock_out.send, self.stats
        while queue:
            due, frame = queue[0]
            if due > now_ns:
                return due
            try:
                send(frame)
            except OSError as e:
                if e.errno in _RETRY_ERRNOS:
                    return now_ns + RETRY_WAIT_NS
                st.tx_errors += 1  # EMSGSIZE (offload on), ENETDOWN...: drop, keep going
            else:
                st.frames_out += 1
                st.bytes_out += len(frame)
            queue.popleft()
        return None


def read_control(path: str, *, gso: bool) -> tuple[PathImpairment, PathImpairment]:
    """The impairments of a control file (``{"a_to_b": {delay_ms, jitter_ms, loss_pct}, "b_to_a": ...}``,
    written by :mod:`testbed.netem.live`); ValueError/TypeError/OSError when it cannot be used."""
    data = json.loads(Path(path).read_text())
    ab, ba = (PathImpairment(**{k: float(v) for k, v in data[tag].items()}) for tag in ("a_to_b", "b_to_a"))
    if gso and (ab.loss_pct or ba.loss_pct):
        raise ValueError("a GSO-mode relay cannot drop single packets (loss must stay 0)")
    return ab, ba


def _reloader(control_path: str, dirs: list[_Direction], stats: RelayStats, gso: bool):
    """What the loop calls after SIGUSR1: apply the control file's impairments to both directions."""

    def reload() -> None:
        try:
            ab, ba = read_control(control_path, gso=gso)
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as e:
            print(f"relay: control file {control_path} not applied: {e}", file=sys.stderr, flush=True)
            return
        dirs[0].sched.update(ab)
        dirs[1].sched.update(ba)
        stats.impairments = {"a_to_b": asdict(ab), "b_to_a": asdict(ba)}

    return reload


def _loop(dirs: list[_Direction], stop: threading.Event, reload_flag: threading.Event | None = None,
          reload=None) -> None:
    by_fd = {d.sock_in.fileno(): d for d in dirs}
    fds = list(by_fd)
    while not stop.is_set():
        if reload_flag is not None and reload_flag.is_set():
            reload_flag.clear()
            reload()
        now = time.monotonic_ns()
        wait_s = MAX_WAIT_S
        for d in dirs:
            due = d.release(now)
            if due is not None:
                wait_s = min(wait_s, (due - now) / 1e9)
        readable, _, _ = select.select(fds, [], [], max(wait_s, 0.0))
        if readable:
            now = time.monotonic_ns()
            for fd in readable:
                by_fd[fd].drain(now)


def run_relay(if_a: str, if_b: str, a_to_b: PathImpairment, b_to_a: PathImpairment, *, seed: int = 0,
              stop: threading.Event | None = None, stats_path: str | None = None,
              ready_file: str | None = None, gso: bool = False,
              queue_limit_frames: int = DEFAULT_QUEUE_LIMIT_FRAMES, control_path: str | None = None,
              reload_flag: threading.Event | None = None) -> RelayStats:
    """Relay frames between ``if_a`` and ``if_b`` (both in the current namespace) until ``stop`` is
    set or, in the main thread, SIGTERM/SIGINT arrives. Touches ``ready_file`` once both sockets are
    bound; writes the stats as JSON to ``stats_path`` on every exit path. ``gso``: see module doc.
    ``control_path``: live changes — when ``reload_flag`` is set (in the main thread: on SIGUSR1) the
    relay reads new impairments from this JSON file (:func:`read_control`) and applies them in place."""
    if gso and (a_to_b.loss_pct or b_to_a.loss_pct):
        raise ValueError("GSO mode cannot drop single packets: use frame mode (gso=False) with loss_pct > 0")
    if queue_limit_frames < 1:
        raise ValueError(f"queue_limit_frames must be >= 1, got {queue_limit_frames}")
    stop = stop if stop is not None else threading.Event()
    stats = RelayStats(if_a=if_a, if_b=if_b, mode="gso" if gso else "frame", seed=seed,
                       impairments={"a_to_b": asdict(a_to_b), "b_to_a": asdict(b_to_a)})
    # frame mode: MTU + Ethernet/VLAN headers, with room to spare
    frame_bytes = GSO_FRAME_BYTES if gso else max(interface_mtu(if_a), interface_mtu(if_b)) + 64
    if ready_file:
        Path(ready_file).unlink(missing_ok=True)
    old_handlers = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            old_handlers[sig] = signal.signal(sig, lambda *_: stop.set())
        if control_path:
            reload_flag = reload_flag if reload_flag is not None else threading.Event()
            old_handlers[signal.SIGUSR1] = signal.signal(signal.SIGUSR1, lambda *_: reload_flag.set())
    t0, cpu0 = time.monotonic(), _cpu_s()
    sa = sb = None
    try:
        sa, sb = open_packet_socket(if_a, vnet_hdr=gso), open_packet_socket(if_b, vnet_hdr=gso)
        _set_timer_slack_ns(1_000)
        dirs = [
            _Direction(sa, sb, DirectionSchedule(a_to_b, seed, "ab"), stats.a_to_b, frame_bytes, queue_limit_frames),
            _Direction(sb, sa, DirectionSchedule(b_to_a, seed, "ba"), stats.b_to_a, frame_bytes, queue_limit_frames),
        ]
        if ready_file:
            Path(ready_file).touch()
        reload = _reloader(control_path, dirs, stats, gso) if control_path else None
        _loop(dirs, stop, reload_flag if control_path else None, reload)
        for d in dirs:
            d.stats.queued_at_exit = len(d.queue)
    finally:
        if sa is not None and sb is not None:
            stats.a_to_b.kernel_drops, stats.b_to_a.kernel_drops = _kernel_drops(sa), _kernel_drops(sb)
        for sock in (s for s in (sa, sb) if s is not None):
            sock.close()
        for sig, handler in old_handlers.items():
            signal.signal(sig, handler)
        stats.duration_s = time.monotonic() - t0
        stats.cpu_s = _cpu_s() - cpu0
        if stats_path:
            stats.write(stats_path)
    return stats


def _cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_THREAD)  # the relay's own thread, in a process or not
    return ru.ru_utime + ru.ru_stime


def set_offloads(ifname: str, *, enabled: bool) -> dict[str, bool]:
    """:func:`testbed.netem.offload.set_offloads`, imported lazily (keeps pyroute2 out of the relay)."""
    from testbed.netem.offload import set_offloads as _set

    return _set(ifname, enabled=enabled)


def relay_argv(if_a: str, if_b: str, a_to_b: PathImpairment, b_to_a: PathImpairment, *, seed: int,
               stats_path: str | None = None, ready_file: str | None = None, gso: bool = False,
               python: str | None = None, netns: str | None = None, control_path: str | None = None) -> list[str]:
    """argv of ``python -m testbed.netem.relay.relay`` for these settings. Spawn it inside R, or pass
    ``netns`` (a name or a ``/proc/PID/ns/net`` path): the relay enters R itself before anything
    else, so the spawner needs no ``preexec_fn`` (a plain, fast vfork+exec)."""
    argv = [python or sys.executable, "-m", "testbed.netem.relay.relay", "--if-a", if_a, "--if-b", if_b,
            "--seed", str(int(seed))]
    if netns:
        argv += ["--netns", netns]
    for tag, imp in (("ab", a_to_b), ("ba", b_to_a)):  # str(float) round-trips exactly
        argv += [f"--delay-{tag}-ms", str(float(imp.delay_ms)), f"--jitter-{tag}-ms", str(float(imp.jitter_ms)),
                 f"--loss-{tag}-pct", str(float(imp.loss_pct))]
    if stats_path:
        argv += ["--stats", str(stats_path)]
    if ready_file:
        argv += ["--ready-file", str(ready_file)]
    if gso:
        argv.append("--gso")
    if control_path:
        argv += ["--control", str(control_path)]
    return argv


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m testbed.netem.relay.relay", description=__doc__.split("\n\n")[0])
    p.add_argument("--if-a", required=True)
    p.add_argument("--if-b", required=True)
    p.add_argument("--netns", help="network namespace (name or /proc/PID/ns/net path) to run in")
    p.add_argument("--delay-ab-ms", type=float, required=True)
    p.add_argument("--delay-ba-ms", type=float, help="default: same as --delay-ab-ms")
    for name in ("jitter-ab-ms", "jitter-ba-ms", "loss-ab-pct", "loss-ba-pct"):
        p.add_argument(f"--{name}", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--stats", help="write stats JSON here on exit")
    p.add_argument("--ready-file", help="touch this file once both sockets are bound")
    p.add_argument("--gso", action="store_true", help="carry GSO super-frames (PACKET_VNET_HDR); no loss")
    p.add_argument("--queue-limit-frames", type=int, default=DEFAULT_QUEUE_LIMIT_FRAMES)
    p.add_argument("--control", help="on SIGUSR1, read new impairments from this JSON file and apply them live")
    return p


def main(argv: list[str] | None = None) -> int:
    p = _parser()
    a = p.parse_args(argv)
    delay_ba = a.delay_ab_ms if a.delay_ba_ms is None else a.delay_ba_ms
    try:
        ab = PathImpairment(a.delay_ab_ms, a.jitter_ab_ms, a.loss_ab_pct)
        ba = PathImpairment(delay_ba, a.jitter_ba_ms, a.loss_ba_pct)
        if a.gso and (ab.loss_pct or ba.loss_pct):
            raise ValueError("--gso cannot be combined with loss (per-packet loss needs frame mode)")
    except (TypeError, ValueError) as e:
        p.error(str(e))
    if a.netns:
        from testbed.netem.nsexec import enter_netns

        try:
            enter_netns(a.netns)
        except OSError as e:
            print(f"relay: cannot enter network namespace {a.netns}: {e.strerror or e}", file=sys.stderr)
            return 1
    run_relay(a.if_a, a.if_b, ab, ba, seed=a.seed, stats_path=a.stats, ready_file=a.ready_file,
              gso=a.gso, queue_limit_frames=a.queue_limit_frames, control_path=a.control)
    return 0


if __name__ == "__main__":
    sys.exit(main())
