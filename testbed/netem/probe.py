"""A short TCP probe over a live path (``bandwidth_basis: probe`` on emulated substrates).

One TCP connection from the source site's namespace to a listener this process opens in the
destination's, bulk data for ``wall_s`` seconds; the goodput is what the receiver got in the last
two thirds of the probe (the first third is slow start and is not what a long transfer sees),
so a probe under cross-traffic measures the share a new flow reaches, not its ramp.

A probe whose connection does not open within its deadline (``wall_s`` + :data:`CONNECT_GRACE_S`) or
is refused measured a dead path: goodput 0, and :attr:`PathProbe.error` says why. It is a measurement
like any other (the predictor then sees no bandwidth and the move is infeasible), not a failed run.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass

MIN_PROBE_WALL_S = 0.5
CONNECT_GRACE_S = 10.0  # beyond the probe's own length: three SYN retransmissions (1, 2, 4 s) fit
CHUNK = 1 << 20


@dataclass(frozen=True)
class PathProbe:
    goodput_bps: float  # receiver side, the last two thirds of the probe
    bytes_sent: int
    wall_s: float  # connect to close
    connect_s: float | None = None  # until the connection opened (None: it never did)
    error: str = ""  # why the path carried nothing, or stopped carrying mid-probe ("" when it did not)


def probe_path(src_ns: str, dst_ns: str, dst_addr: str, wall_s: float) -> PathProbe:
    from testbed.netem.nsexec import in_netns

    with in_netns(dst_ns):
        srv = socket.socket()
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind((dst_addr, 0))
        srv.listen(1)
    port = srv.getsockname()[1]
    samples: list[tuple[float, int]] = []
    done = threading.Event()

    srv.settimeout(wall_s + CONNECT_GRACE_S)  # here, not in the sink: a failed connect may close srv first

    def sink() -> None:
        try:
            conn, _ = srv.accept()
        except OSError:
            done.set()
            return
        conn.settimeout(wall_s + CONNECT_GRACE_S)
        buf = bytearray(CHUNK)
        got = 0
        try:
            while True:
                n = conn.recv_into(buf)
                if not n:
                    break
                got += n
                samples.append((time.monotonic(), got))
        except OSError:
            pass
        finally:
            conn.close()
            done.set()

    th = threading.Thread(target=sink, name="tb-probe-sink", daemon=True)
    th.start()
    t0 = time.monotonic()
    sent = 0
    stalled = ""
    try:
        with in_netns(src_ns):
            cl = socket.socket()
        try:
            cl.settimeout(wall_s + CONNECT_GRACE_S)
            try:
                cl.connect((dst_addr, port))
            except OSError as e:  # TimeoutError included: the path carried nothing in time
                waited = time.monotonic() - t0
                cause = "timed out" if isinstance(e, TimeoutError) else (e.strerror or type(e).__name__)
                return PathProbe(goodput_bps=0.0, bytes_sent=0, wall_s=waited, connect_s=None,
                                 error=f"connect to {dst_addr} failed after {waited:.1f} s ({cause})")
            connect_s = time.monotonic() - t0
            data = b"\0" * CHUNK
            deadline = t0 + wall_s
            try:
                while time.monotonic() < deadline:
                    cl.sendall(data)
                    sent += len(data)
            except OSError as e:  # the path stalled or broke mid-probe: what arrived is the measurement
                stalled = f"sending stopped after {time.monotonic() - t0:.1f} s ({e.strerror or 'timed out'})"
        finally:
            cl.close()
        done.wait(wall_s + CONNECT_GRACE_S)
    finally:
        try:
            srv.shutdown(socket.SHUT_RDWR)  # wakes a sink still waiting in accept
        except OSError:
            pass
        srv.close()
    elapsed = time.monotonic() - t0
    cut = t0 + elapsed / 3.0
    late = [(t, b) for t, b in samples if t >= cut]
    early = [(t, b) for t, b in samples if t < cut]
    if len(late) >= 2:
        t_a, b_a = early[-1] if early else late[0]
        t_b, b_b = late[-1]
        bps = 8.0 * (b_b - b_a) / max(t_b - t_a, 1e-6)
    else:
        bps = 8.0 * (samples[-1][1] if samples else 0) / max(elapsed, 1e-6)
    return PathProbe(goodput_bps=bps, bytes_sent=sent, wall_s=elapsed, connect_s=connect_s, error=stalled)
