"""A short TCP probe over a live path (``bandwidth_basis: probe`` on emulated substrates).

One TCP connection from the source site's namespace to a listener this process opens in the
destination's, bulk data for ``wall_s`` seconds; the goodput is what the receiver got in the last
two thirds of the probe (the first third is slow start and is not what a long transfer sees),
so a probe under cross-traffic measures the share a new flow reaches, not its ramp.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass

MIN_PROBE_WALL_S = 0.5
CHUNK = 1 << 20


@dataclass(frozen=True)
class PathProbe:
    goodput_bps: float  # receiver side, the last two thirds of the probe
    bytes_sent: int
    wall_s: float  # connect to close


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

    def sink() -> None:
        srv.settimeout(wall_s + 10)
        try:
            conn, _ = srv.accept()
        except OSError:
            done.set()
            return
        conn.settimeout(wall_s + 10)
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
    try:
        with in_netns(src_ns):
            cl = socket.socket()
        try:
            cl.settimeout(wall_s + 10)
            cl.connect((dst_addr, port))
            data = b"\0" * CHUNK
            deadline = t0 + wall_s
            while time.monotonic() < deadline:
                cl.sendall(data)
                sent += len(data)
        finally:
            cl.close()
        done.wait(wall_s + 10)
    finally:
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
    return PathProbe(goodput_bps=bps, bytes_sent=sent, wall_s=elapsed)
