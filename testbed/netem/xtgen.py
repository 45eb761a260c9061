"""The cross-traffic generator: a small asyncio program run inside a site's namespace.

``python -m testbed.netem.xtgen sink --netns NS --port P --stats FILE --ready FILE``
    accepts TCP connections and UDP datagrams on port P and discards them (counting bytes);
``python -m testbed.netem.xtgen send --netns NS --spec JSON --stats FILE --ready FILE``
    generates one link direction's cross-traffic towards a sink (wall-clock units, already scaled
    by :mod:`testbed.netem.crosstraffic`): long-lived bulk TCP flows, a paced UDP stream, on/off flows,
    Poisson arrivals of Pareto-sized flows, and the steps of a trace file.

Both enter the namespace themselves (``--netns``) before opening a socket, write their counters
as JSON to ``--stats`` every :data:`STATS_EVERY_S` (atomically) and end on SIGTERM. Only the
standard library and :mod:`testbed.netem.nsexec` are imported: a generator starts in ~50 ms.

Schedules (on/off, trace) run on scenario time: the emulated run's clock, which its substrate
writes to ``clock_file`` at every control step (scenario seconds and the CLOCK_MONOTONIC instant,
extrapolated at ``time_scale`` in between); without one (``testbed net up``), wall seconds since
the generator started x ``time_scale``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import socket
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

STATS_EVERY_S = 0.2
CHUNK = 256 * 1024
UDP_PAYLOAD = 1400
UDP_TICK_S = 0.002
RETRY_S = 0.2
CLOCK_REREAD_S = 0.05
MAX_THREADS = 512  # one per open flow (an entry's kinds together stay below this)
TCP_CONGESTION = getattr(socket, "TCP_CONGESTION", 13)


class Counters:
    def __init__(self) -> None:
        self.tcp_bytes = 0
        self.udp_bytes = 0
        self.flows = 0  # TCP connections open now
        self.flows_started = 0
        self.errors = 0
        self.last_error = ""

    def dump(self, path: str, t0: float) -> None:
        d = dict(self.__dict__, wall_s=time.monotonic() - t0, pid=os.getpid())
        tmp = f"{path}.tmp"
        with open(tmp, "w") as f:
            json.dump(d, f)
        os.replace(tmp, path)


async def _stats_loop(c: Counters, path: str, t0: float) -> None:
    while True:
        c.dump(path, t0)
        await asyncio.sleep(STATS_EVERY_S)


# --------------------------------------------------------------------------------- sink


async def _sink(port: int, c: Counters, bound: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        c.flows += 1
        c.flows_started += 1
        try:
            while True:
                data = await reader.read(CHUNK)
                if not data:
                    break
                c.tcp_bytes += len(data)
        except (ConnectionError, OSError):
            pass
        finally:
            c.flows -= 1
            writer.close()

    server = await asyncio.start_server(handle, "0.0.0.0", port, backlog=256, reuse_address=True)

    class Udp(asyncio.DatagramProtocol):
        def datagram_received(self, data: bytes, addr) -> None:
            c.udp_bytes += len(data)

    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    sock.bind(("0.0.0.0", port))
    await loop.create_datagram_endpoint(Udp, sock=sock)
    bound.set()
    async with server:
        await server.serve_forever()


# --------------------------------------------------------------------------------- sender


class Sender:
    def __init__(self, spec: dict, c: Counters):
        self.spec = spec
        self.c = c
        self.dst = (spec["dst"], int(spec["port"]))
        self.time_scale = float(spec.get("time_scale", 1.0))
        self.t0 = time.monotonic()
        self.clock_file = spec.get("clock_file")
        self._clock: tuple[float, float] | None = None
        self._clock_read = -1e9
        self.rng = random.Random(int(spec.get("seed", 0)))
        self.buf = b"\0" * CHUNK

    def traffic_s(self) -> float:
        """Scenario seconds now: from the run's clock file where the emulation writes one (its scenario
        time and the CLOCK_MONOTONIC instant it held, extrapolated at time_scale), else wall seconds
        since this generator started x time_scale."""
        now = time.monotonic()
        if self.clock_file:
            if now - self._clock_read >= CLOCK_REREAD_S:
                self._clock_read = now
                try:
                    with open(self.clock_file) as f:
                        d = json.load(f)
                    self._clock = (float(d["t_s"]), float(d["mono"]))
                except (OSError, ValueError, KeyError, TypeError):
                    pass
            if self._clock is not None:
                t_s, mono = self._clock
                return t_s + (now - mono) * self.time_scale
        return (now - self.t0) * self.time_scale

    async def _connect(self, cc: str | None) -> socket.socket:
        loop = asyncio.get_running_loop()
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        if cc:
            s.setsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, cc.encode())
        try:
            await loop.sock_connect(s, self.dst)
        except BaseException:
            s.close()
            raise
        return s

    def _pump(self, s: socket.socket, size: int | None, until, stop: threading.Event) -> None:
        """Blocking sends from a thread: the socket never waits for the event loop to refill it (with
        asyncio's writes a flow was application-limited now and then and lost ~20 % of its share)."""
        left = size
        view = memoryview(self.buf)
        while left is None or left > 0:
            if stop.is_set() or (until is not None and not until()):
                break
            n = CHUNK if left is None else min(CHUNK, left)
            s.sendall(view[:n])
            self.c.tcp_bytes += n
            if left is not None:
                left -= n

    async def flow(self, cc: str | None, size: int | None = None, until=None) -> None:
        """One TCP connection: ``size`` bytes (None: until ``until()`` is False or cancelled)."""
        loop = asyncio.get_running_loop()
        s = await self._connect(cc)
        s.setblocking(True)
        self.c.flows += 1
        self.c.flows_started += 1
        stop = threading.Event()
        try:
            await loop.run_in_executor(None, self._pump, s, size, until, stop)
        finally:
            stop.set()
            self.c.flows -= 1
            if size is None and until is None:  # cancelled: the thread may still be in a send
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    async def _retrying(self, make) -> None:
        """Run ``make()`` (a connection's coroutine) again after an error, e.g. before the sink listens."""
        while True:
            try:
                await make()
                return
            except (ConnectionError, OSError) as e:
                self.c.errors += 1
                self.c.last_error = str(e)[:200]
                await asyncio.sleep(RETRY_S)

    async def bulk(self, cc: str | None) -> None:
        while True:
            await self._retrying(lambda: self.flow(cc))
            await asyncio.sleep(RETRY_S)  # a bulk flow ended by the other side: open it again

    async def on_off(self, cc: str | None, phase_s: float, on_s: float, off_s: float) -> None:
        period = on_s + off_s
        while True:
            pos = (self.traffic_s() + phase_s) % period
            if pos >= on_s:  # off: wait for the next on period
                await asyncio.sleep((period - pos) / self.time_scale)
                continue
            end = self.traffic_s() + (on_s - pos)
            await self._retrying(lambda: self.flow(cc, until=lambda: self.traffic_s() < end))

    async def poisson(self, cc: str | None, rate_per_wall_s: float, mean_bytes: float, shape: float,
                      max_flows: int) -> None:
        sem = asyncio.Semaphore(max_flows)
        x_m = mean_bytes * (shape - 1.0) / shape
        tasks: set = set()

        async def one(size: int) -> None:
            async with sem:
                try:
                    await self.flow(cc, size=size)
                except (ConnectionError, OSError) as e:
                    self.c.errors += 1
                    self.c.last_error = str(e)[:200]

        while True:
            await asyncio.sleep(self.rng.expovariate(rate_per_wall_s))
            size = max(1, int(x_m * (1.0 - self.rng.random()) ** (-1.0 / shape)))
            t = asyncio.create_task(one(size))
            tasks.add(t)
            t.add_done_callback(tasks.discard)

    async def udp(self, rate_bps) -> None:
        """A paced UDP stream; ``rate_bps()`` is read every tick (a trace may change it)."""
        loop = asyncio.get_running_loop()
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setblocking(False)
        payload = b"\0" * UDP_PAYLOAD
        credit = 0.0
        last = time.monotonic()
        while True:
            await asyncio.sleep(UDP_TICK_S)
            now = time.monotonic()
            credit = min(credit + rate_bps() / 8.0 * (now - last), 64 * UDP_PAYLOAD)
            last = now
            while credit >= UDP_PAYLOAD:
                try:
                    await loop.sock_sendto(s, payload, self.dst)
                except (BlockingIOError, OSError) as e:  # a full queue: the datagram is lost, as on a wire
                    self.c.errors += isinstance(e, BlockingIOError) is False
                    credit = 0.0
                    break
                self.c.udp_bytes += UDP_PAYLOAD
                credit -= UDP_PAYLOAD

    async def trace(self, cc: str | None, times_s: list, flows: list) -> None:
        """Keep as many bulk flows open as the trace says at the current traffic time."""
        running: list[asyncio.Task] = []
        import bisect

        while True:
            i = max(0, bisect.bisect_right(times_s, self.traffic_s()) - 1)
            want = int(flows[i])
            while len(running) < want:
                running.append(asyncio.create_task(self.bulk(cc)))
            while len(running) > want:
                running.pop().cancel()
            nxt = times_s[i + 1] if i + 1 < len(times_s) else None
            wait = 0.05 if nxt is None else max(0.005, (nxt - self.traffic_s()) / self.time_scale)
            await asyncio.sleep(min(wait, 0.5))

    async def run(self) -> None:
        sp = self.spec
        cc = sp.get("congestion")
        tasks = []
        for _ in range(int(sp.get("tcp_flows", 0))):
            tasks.append(self.bulk(cc))
        if sp.get("on_off"):
            o = sp["on_off"]
            for ph in o["phases_s"]:
                tasks.append(self.on_off(cc, float(ph), float(o["on_s"]), float(o["off_s"])))
        if sp.get("poisson"):
            p = sp["poisson"]
            tasks.append(self.poisson(cc, float(p["rate_per_wall_s"]), float(p["mean_bytes"]), float(p["shape"]),
                                      int(p["max_flows"])))
        trace = sp.get("trace")
        udp_bps = float(sp.get("udp_bps", 0.0))
        if trace:
            import bisect

            times, udp = trace["times_s"], trace["udp_bps"]

            def rate() -> float:
                return udp_bps + float(udp[max(0, bisect.bisect_right(times, self.traffic_s()) - 1)])

            tasks.append(self.trace(cc, times, trace["flows"]))
            if any(udp):
                tasks.append(self.udp(rate))
            elif udp_bps > 0:
                tasks.append(self.udp(lambda: udp_bps))
        elif udp_bps > 0:
            tasks.append(self.udp(lambda: udp_bps))
        await asyncio.gather(*tasks)


# --------------------------------------------------------------------------------- main


def _args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m testbed.netem.xtgen")
    ap.add_argument("role", choices=("sink", "send"))
    ap.add_argument("--netns", default=None, help="enter this network namespace first (name or /proc path)")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--spec", default=None, help="send: the JSON spec (wall-clock units)")
    ap.add_argument("--stats", required=True)
    ap.add_argument("--ready", default=None)
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    a = _args(sys.argv[1:] if argv is None else argv)
    if a.netns:
        from testbed.netem.nsexec import enter_netns

        enter_netns(a.netns)
    c = Counters()
    t0 = time.monotonic()

    def stop(*_: object) -> None:
        try:
            c.dump(a.stats, t0)
        finally:
            os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the run's owner stops us in order (its own Ctrl-C)

    async def go() -> None:
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=MAX_THREADS))
        stats = asyncio.create_task(_stats_loop(c, a.stats, t0))
        bound = asyncio.Event()
        if a.role == "sink":
            main_task = asyncio.create_task(_sink(a.port, c, bound))
            waiter = asyncio.create_task(bound.wait())
            await asyncio.wait({waiter, main_task}, return_when=asyncio.FIRST_COMPLETED)
            if main_task.done():
                main_task.result()  # the bind failed: raise it
        else:
            main_task = asyncio.create_task(Sender(json.loads(a.spec), c).run())
        if a.ready:
            with open(a.ready, "w") as f:
                f.write(str(os.getpid()))
        await asyncio.gather(stats, main_task)

    asyncio.run(go())
    return 0


if __name__ == "__main__":
    sys.exit(main())
