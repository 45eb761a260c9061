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
the generator started x ``time_scale``. The sender re-reads that file every :data:`CLOCK_REREAD_S`
and no schedule sleeps longer than :data:`SCHEDULE_MAX_SLEEP_S` wall seconds (a change of the file
wakes them at once), so a jump of the run's clock over idle time is acted on within about
``CLOCK_REREAD_S``: a schedule's flows are what it says for the clock's time now, so flows that
should have ended during the skipped time end, and flows that should be on at its end start (an
on period that began and ended inside the skip leaves nothing). Poisson arrivals run on wall time
at ``arrivals_per_s x time_scale``: memoryless, so a skip changes nothing about what follows it.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import json
import os
import random
import signal
import socket
import struct
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

STATS_EVERY_S = 0.2
CHUNK = 256 * 1024
UDP_PAYLOAD = 1400
UDP_TICK_S = 0.002
UDP_CATCH_UP_S = 0.02
"""A UDP stream keeps at most this much of its rate as credit: a tick that overslept (a busy host)
is made up for, up to 20 ms of sending."""
UDP_SEGMENT = 103  # linux/udp.h: the socket option of UDP GSO (one send, many datagrams)
UDP_GSO_DATAGRAMS = 46  # 46 x 1400 B: the most one UDP GSO send carries (64 KiB)
UDP_SNDBUF_BYTES = 4 << 20  # the link's queue, not the socket's buffer, decides what is lost
UDP_SENDS_PER_YIELD = 64  # sends between two turns of the event loop (stats, schedules) within one tick
RETRY_S = 0.2
CLOCK_REREAD_S = 0.01
"""How often the sender re-reads the run's clock file (wall seconds): a 10 ms read of a small file."""
SCHEDULE_MAX_SLEEP_S = 0.1
"""The longest a schedule (trace, on/off) sleeps (wall seconds) before it looks at the clock again,
even when nothing has woken it."""
MAX_THREADS = 512  # one per open flow (an entry's kinds together stay below this)
TCP_CONGESTION = getattr(socket, "TCP_CONGESTION", 13)


class Counters:
    def __init__(self) -> None:
        self.tcp_bytes = 0
        self.udp_bytes = 0
        self.flows = 0  # TCP connections open now
        self.flows_started = 0
        self.flows_wanted = 0  # TCP flows the schedules asked for (a bulk flow once, each on period/arrival)
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


class CongestionUnavailable(OSError):
    """The entry's congestion control cannot be set on a socket here: no retry can help."""


def trace_flows_at(times_s: list, flows: list, t_s: float) -> int:
    """A trace's bulk flows at scenario time ``t_s`` (its first row's value before its time)."""
    return int(flows[max(0, bisect.bisect_right(times_s, t_s) - 1)])


def trace_next_s(times_s: list, t_s: float) -> float | None:
    """The trace's next step after ``t_s`` (None: none)."""
    i = bisect.bisect_right(times_s, t_s)
    return float(times_s[i]) if i < len(times_s) else None


def on_off_flows_at(phases_s: list, on_s: float, off_s: float, t_s: float) -> int:
    """How many of the on/off flows are on at scenario time ``t_s`` (flow k is on while
    ``(t + phase_k) mod (on + off) < on``)."""
    period = on_s + off_s
    return sum(1 for ph in phases_s if (t_s + ph) % period < on_s)


def on_off_next_s(phases_s: list, on_s: float, off_s: float, t_s: float) -> float:
    """The next scenario time after ``t_s`` at which one of the on/off flows switches."""
    period = on_s + off_s
    out = float("inf")
    for ph in phases_s:
        pos = (t_s + ph) % period
        out = min(out, t_s + (on_s - pos if pos < on_s else period - pos))
    return out


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
        self._clock_changed: asyncio.Event | None = None  # set (and replaced) when the clock file changes
        self._cc_error: str | None = None  # the congestion control could not be set: no flow can open
        self.rng = random.Random(int(spec.get("seed", 0)))
        self.buf = b"\0" * CHUNK

    def _read_clock(self) -> bool:
        """Re-read the clock file; True when it says something new (a control step, a jump)."""
        self._clock_read = time.monotonic()
        try:
            with open(self.clock_file) as f:  # type: ignore[arg-type]
                d = json.load(f)
            clock = (float(d["t_s"]), float(d["mono"]))
        except (OSError, ValueError, KeyError, TypeError):
            return False
        changed, self._clock = clock != self._clock, clock
        return changed

    def traffic_s(self) -> float:
        """Scenario seconds now: from the run's clock file where the emulation writes one (its scenario
        time and the CLOCK_MONOTONIC instant it held, extrapolated at time_scale), else wall seconds
        since this generator started x time_scale."""
        now = time.monotonic()
        if self.clock_file:
            if now - self._clock_read >= CLOCK_REREAD_S and self._read_clock():
                self._wake()
            if self._clock is not None:
                t_s, mono = self._clock
                return t_s + (time.monotonic() - mono) * self.time_scale
        return (now - self.t0) * self.time_scale

    def _wake(self) -> None:
        if self._clock_changed is not None:
            self._clock_changed.set()
            self._clock_changed = asyncio.Event()

    async def watch_clock(self) -> None:
        """Re-read the run's clock file every CLOCK_REREAD_S and wake the schedules when it changed."""
        self._clock_changed = asyncio.Event()
        while True:
            if self._read_clock():
                self._wake()
            await asyncio.sleep(CLOCK_REREAD_S)

    async def sleep_until(self, t_s: float | None) -> None:
        """Sleep until scenario time ``t_s`` (None: none coming), at most SCHEDULE_MAX_SLEEP_S wall
        seconds; a change of the clock file (a control step, a jump over idle time) ends it at once."""
        wall = SCHEDULE_MAX_SLEEP_S if t_s is None else (t_s - self.traffic_s()) / self.time_scale
        wall = min(max(wall, 0.001), SCHEDULE_MAX_SLEEP_S)
        if self._clock_changed is None:
            await asyncio.sleep(wall)
            return
        try:
            await asyncio.wait_for(self._clock_changed.wait(), timeout=wall)
        except asyncio.TimeoutError:
            pass

    async def _connect(self, cc: str | None) -> socket.socket:
        loop = asyncio.get_running_loop()
        if self._cc_error:
            raise CongestionUnavailable(self._cc_error)
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            if cc:
                try:
                    s.setsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, cc.encode())
                except OSError as e:
                    self._cc_error = f"congestion control {cc!r} cannot be set: {e.strerror or e}"
                    raise CongestionUnavailable(self._cc_error) from None
            await loop.sock_connect(s, self.dst)
        except BaseException:
            s.close()
            raise
        return s

    def _pump(self, s: socket.socket, size: int | None, stop: threading.Event, gate: threading.Lock,
              started: threading.Event) -> None:
        """Blocking sends from a thread: the socket never waits for the event loop to refill it (with
        asyncio's writes a flow was application-limited now and then and lost ~20 % of its share).
        The thread closes the socket when it is done (a stopped flow's socket is shut down under it)."""
        with gate:
            if stop.is_set():  # cancelled before this thread got to it
                s.close()
                return
            started.set()
        left = size
        view = memoryview(self.buf)
        try:
            while left is None or left > 0:
                if stop.is_set():
                    break
                n = CHUNK if left is None else min(CHUNK, left)
                try:
                    s.sendall(view[:n])
                except OSError:
                    if stop.is_set():
                        break  # ended by its schedule (shut down under the send)
                    raise
                self.c.tcp_bytes += n
                if left is not None:
                    left -= n
        finally:
            s.close()

    async def flow(self, cc: str | None, size: int | None = None) -> None:
        """One TCP connection: ``size`` bytes (None: until cancelled). A cancelled flow ends at once:
        its connection is reset (what it had queued is dropped, not sent after its end)."""
        loop = asyncio.get_running_loop()
        s = await self._connect(cc)
        s.setblocking(True)
        self.c.flows += 1
        self.c.flows_started += 1
        stop, gate, started = threading.Event(), threading.Lock(), threading.Event()
        done = False
        try:
            await loop.run_in_executor(None, self._pump, s, size, stop, gate, started)
            done = True
        finally:
            with gate:
                stop.set()
                ran = started.is_set()
            self.c.flows -= 1
            if not ran:  # cancelled before its thread began: it never will
                s.close()
            elif not done:  # cancelled (or the send failed): the thread may still be in a send
                try:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    s.shutdown(socket.SHUT_RDWR)  # wakes the send; the thread's close then resets
                except OSError:
                    pass  # closed already by its thread

    def _error(self, e: BaseException) -> None:
        self.c.errors += 1
        self.c.last_error = str(e)[:200]

    async def _retrying(self, make) -> None:
        """Run ``make()`` (a connection's coroutine) again after an error, e.g. before the sink listens.
        An error no retry can mend (the congestion control) is counted once and the flow waits, open
        never, until it is cancelled or the generator ends."""
        while True:
            try:
                await make()
                return
            except CongestionUnavailable as e:
                self._error(e)
                await asyncio.Event().wait()
            except (ConnectionError, OSError) as e:
                self._error(e)
                await asyncio.sleep(RETRY_S)

    async def bulk(self, cc: str | None) -> None:
        self.c.flows_wanted += 1
        while True:
            await self._retrying(lambda: self.flow(cc))
            await asyncio.sleep(RETRY_S)  # a bulk flow ended by the other side: open it again

    async def follow(self, cc: str | None, flows_at, next_s) -> None:
        """Keep ``flows_at(t)`` bulk flows open, t the run's scenario time now: every change of the
        clock (a step, a jump) and every change of the schedule (``next_s(t)``, its next switch)
        opens or ends flows, so after a jump the flows are those of the new time."""
        running: list[asyncio.Task] = []
        try:
            while True:
                t = self.traffic_s()
                want = flows_at(t)
                while len(running) < want:
                    running.append(asyncio.create_task(self.bulk(cc)))
                while len(running) > want:
                    running.pop().cancel()
                await self.sleep_until(next_s(t))
        finally:
            for task in running:
                task.cancel()

    async def on_off(self, cc: str | None, phases_s: list, on_s: float, off_s: float) -> None:
        """Flows that are on while ``(t + phase) mod (on + off) < on`` (t: the run's scenario time)."""
        await self.follow(cc, lambda t: on_off_flows_at(phases_s, on_s, off_s, t),
                          lambda t: on_off_next_s(phases_s, on_s, off_s, t))

    async def poisson(self, cc: str | None, rate_per_wall_s: float, mean_bytes: float, shape: float,
                      max_flows: int) -> None:
        sem = asyncio.Semaphore(max_flows)
        x_m = mean_bytes * (shape - 1.0) / shape
        tasks: set = set()

        async def one(size: int) -> None:
            self.c.flows_wanted += 1
            async with sem:
                try:
                    await self.flow(cc, size=size)
                except (ConnectionError, OSError) as e:
                    self._error(e)

        while True:
            await asyncio.sleep(self.rng.expovariate(rate_per_wall_s))
            size = max(1, int(x_m * (1.0 - self.rng.random()) ** (-1.0 / shape)))
            t = asyncio.create_task(one(size))
            tasks.add(t)
            t.add_done_callback(tasks.discard)

    async def udp(self, rate_bps) -> None:
        """A paced UDP stream of :data:`UDP_PAYLOAD`-byte datagrams; ``rate_bps()`` is read every tick
        (a trace may change it). Each tick sends what the rate earned since the last, in UDP GSO sends
        of up to :data:`UDP_GSO_DATAGRAMS` datagrams where the kernel has them (one system call, and
        the kernel cuts the datagrams: one datagram per call tops out near 140 Mbit/s in Python)."""
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setblocking(False)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, UDP_SNDBUF_BYTES)
        per_send = 1
        try:
            s.setsockopt(socket.IPPROTO_UDP, UDP_SEGMENT, UDP_PAYLOAD)
            per_send = UDP_GSO_DATAGRAMS
        except OSError:
            pass  # no UDP GSO here: one datagram per send
        payload = b"\0" * (UDP_PAYLOAD * per_send)
        credit = 0.0
        last = time.monotonic()
        while True:
            await asyncio.sleep(UDP_TICK_S)
            now = time.monotonic()
            rate = rate_bps()
            credit = min(credit + rate / 8.0 * (now - last), max(64 * UDP_PAYLOAD, rate / 8.0 * UDP_CATCH_UP_S))
            last = now
            sends = 0
            while credit >= UDP_PAYLOAD:
                sends += 1
                if sends % UDP_SENDS_PER_YIELD == 0:  # a queue that drops (never blocks us) must not starve the loop
                    await asyncio.sleep(0)
                n = min(per_send, int(credit // UDP_PAYLOAD))
                try:
                    s.sendto(memoryview(payload)[:n * UDP_PAYLOAD], self.dst)
                except BlockingIOError:  # the socket's buffer is full: what it does not take is lost, as on a wire
                    credit = 0.0
                    break
                except OSError:  # a send the kernel refused (no route): count it, keep sending
                    self.c.errors += 1
                    credit = 0.0
                    break
                self.c.udp_bytes += n * UDP_PAYLOAD
                credit -= n * UDP_PAYLOAD

    async def trace(self, cc: str | None, times_s: list, flows: list) -> None:
        """Keep as many bulk flows open as the trace says at the run's scenario time."""
        await self.follow(cc, lambda t: trace_flows_at(times_s, flows, t), lambda t: trace_next_s(times_s, t))

    async def run(self) -> None:
        sp = self.spec
        cc = sp.get("congestion")
        tasks = []
        if self.clock_file:
            tasks.append(self.watch_clock())
        for _ in range(int(sp.get("tcp_flows", 0))):
            tasks.append(self.bulk(cc))
        if sp.get("on_off"):
            o = sp["on_off"]
            tasks.append(self.on_off(cc, [float(ph) for ph in o["phases_s"]], float(o["on_s"]), float(o["off_s"])))
        if sp.get("poisson"):
            p = sp["poisson"]
            tasks.append(self.poisson(cc, float(p["rate_per_wall_s"]), float(p["mean_bytes"]), float(p["shape"]),
                                      int(p["max_flows"])))
        trace = sp.get("trace")
        udp_bps = float(sp.get("udp_bps", 0.0))
        if trace:
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
