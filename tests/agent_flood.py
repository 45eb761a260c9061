"""A flood of idle, unauthenticated TCP connections against a node agent's control port or a transfer
server (any :class:`testbed.netguard.Gate`; shared by the unit and the integration tests of issue
12's bullet 6)."""

from __future__ import annotations

import selectors
import socket
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator

from testbed.agent.wire import CHALLENGE as AGENT_CHALLENGE
from testbed.netguard.challenge import Challenge


class Flood:
    """``n`` idle TCP connections to ``addr`` that never authenticate, opened non-blocking in
    batches: each batch is opened once the agent accepted the previous one (every connection got
    the challenge, or was closed), so that none is lost in a full listen queue before the agent
    ever sees it. ``seen`` counts what came back."""

    def __init__(self, addr: tuple[str, int], n: int, *, batch: int = 200, timeout_s: float = 60.0,
                 source: str | None = None, socket_factory: Callable[..., socket.socket] = socket.socket,
                 challenge: Challenge = AGENT_CHALLENGE):
        self.addr, self.source, self._factory, self._challenge = addr, source, socket_factory, challenge
        self.socks: list[socket.socket] = []
        self.seen = {"challenged": 0, "closed_unchallenged": 0}
        deadline = time.monotonic() + timeout_s
        try:
            while len(self.socks) < n:
                new = []
                for _ in range(min(batch, n - len(self.socks))):
                    s = self.open_one()
                    self.socks.append(s)
                    new.append(s)
                self._wait_accepted(new, deadline)
        except BaseException:
            self.close()
            raise

    def open_one(self) -> socket.socket:
        """One more connection (non-blocking, connecting)."""
        s = self._factory(socket.AF_INET, socket.SOCK_STREAM)
        try:
            if self.source:
                s.bind((self.source, 0))
            s.setblocking(False)
            s.connect_ex(self.addr)
        except BaseException:
            s.close()
            raise
        return s

    def refill(self) -> int:
        """Re-open every connection the agent closed (a flood that keeps coming back); returns how many."""
        n = 0
        for i, s in enumerate(self.socks):
            try:
                while s.recv(64):
                    pass
            except BlockingIOError:
                continue  # still open (idle)
            except OSError:
                pass
            s.close()
            self.socks[i] = self.open_one()
            n += 1
        return n

    def _wait_accepted(self, socks: list[socket.socket], deadline: float) -> None:
        sel = selectors.DefaultSelector()
        for s in socks:
            sel.register(s, selectors.EVENT_READ)
        got: dict[socket.socket, bytes] = {}
        closed = 0
        while len(got) + closed < len(socks) and time.monotonic() < deadline:
            for key, _ in sel.select(0.5):
                s = key.fileobj
                try:
                    data = s.recv(64)  # type: ignore[union-attr]
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    data = b""
                if data:
                    got[s] = got.get(s, b"") + data  # type: ignore[index]
                    if len(got[s]) >= self._challenge.size:  # type: ignore[index]
                        sel.unregister(s)
                else:
                    sel.unregister(s)
                    if s not in got:
                        closed += 1
        sel.close()
        assert len(got) + closed == len(socks), f"only {len(got) + closed} of a batch of {len(socks)} accepted"
        for data in got.values():
            assert self._challenge.nonce_of(data[:self._challenge.size]) is not None, data
        self.seen["challenged"] += len(got)
        self.seen["closed_unchallenged"] += closed

    def still_open(self) -> int:
        """How many the agent has not closed (a closed one reads EOF)."""
        n = 0
        for s in self.socks:
            try:
                s.recv(64)
                while s.recv(64):
                    pass
            except BlockingIOError:
                n += 1
            except OSError:
                pass
        return n

    def close(self) -> None:
        for s in self.socks:
            s.close()


@contextmanager
def sustained(flood: Flood, *, rounds: int = 1, period_s: float = 0.02) -> Iterator[list[int]]:
    """Keep ``flood`` coming back (a thread re-opens every connection the server closed) for the
    block, entered once the server has closed ``rounds`` x the flood's size; yields the running
    count of re-opened connections. The flood is closed after the block."""
    stop = threading.Event()
    reopened = [0]

    def keep_flooding() -> None:
        while not stop.is_set():
            reopened[0] += flood.refill()
            time.sleep(period_s)

    th = threading.Thread(target=keep_flooding, daemon=True)
    th.start()
    try:
        while reopened[0] < rounds * len(flood.socks):
            time.sleep(0.05)
        yield reopened
    finally:
        stop.set()
        th.join(timeout=10)
        flood.close()


class FlakyListener(socket.socket):
    """A listening socket whose accept() fails with given errors first (set ``failures``)."""

    failures: list[BaseException] = []

    def accept(self):  # type: ignore[override]
        if self.failures:
            raise self.failures.pop(0)
        return super().accept()
