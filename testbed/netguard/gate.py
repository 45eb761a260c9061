"""``Gate``: the accept loop of a server that hostile peers can reach, and its guard on every
connection that has not authenticated yet.

One thread (:meth:`Gate.serve_forever`) accepts connections and runs every *unauthenticated* one
through the handshake of :class:`~testbed.netguard.challenge.Challenge` with a selector: such a
connection costs one file descriptor and a few bytes, never a thread, and nothing it sends is
parsed (the gate reads exactly ``MAC_BYTES`` from it):

- at most ``max_pending`` of them exist at once; a new one over the cap evicts the oldest
  connection of the source address that holds the most (a fair share per address: a flood from
  one address, however fast it reconnects, only evicts its own connections, so a legitimate peer's
  single connection gets through; a flood from many addresses evicts the oldest among the biggest
  holders, and a legitimate peer answers the challenge within a round trip);
- each has ``auth_timeout_s`` to answer the challenge, then it is closed;
- a wrong answer gets the server's refusal (``refusal(message)`` bytes, small) and is closed.

A correct answer hands the connection (blocking again) to ``admit(conn, source)``, on the gate's
thread: the server decides what to do with it (start a thread, or refuse it as busy) and must not
block. The accept loop survives every error: out of file descriptors (EMFILE/ENFILE) it frees the
oldest pending connection and retries, or pauses accepting with a growing back-off when there is
none to free; anything else is logged and the loop goes on. :meth:`stats` counts what happened.
Floods are logged once, then summarised every ``LOG_EVERY_S``.
"""

from __future__ import annotations

import errno
import logging
import selectors
import socket
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Callable

from testbed.netguard.challenge import MAC_BYTES, Challenge

MAX_PENDING = 64
AUTH_TIMEOUT_S = 5.0
LISTEN_BACKLOG = 1024  # the kernel caps it at net.core.somaxconn
ACCEPT_BACKOFF_S = (0.01, 1.0)  # first and longest pause of accepting while out of descriptors
ACCEPT_BATCH = 256  # accepts in a row before pending connections and deadlines get a turn
LOG_EVERY_S = 5.0
_OUT_OF_FDS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
_COUNTERS = ("accepted", "authenticated", "evicted", "timed_out", "auth_failed", "accept_errors", "out_of_fds",
             "loop_errors")


@dataclass
class _Pending:
    nonce: bytes
    deadline: float
    source: str
    got: bytearray = field(default_factory=bytearray)


class Gate:
    """``Gate(listener, challenge, token, admit, refusal, name=...)``; run :meth:`serve_forever` in a
    thread, :meth:`stop` from another. ``listener`` is bound and listening; the gate owns it from now
    on (it is closed by :meth:`stop`)."""

    def __init__(self, listener: socket.socket, challenge: Challenge, token: str | bytes,
                 admit: Callable[[socket.socket, str], None], refusal: Callable[[str], bytes], *, name: str,
                 max_pending: int = MAX_PENDING, auth_timeout_s: float = AUTH_TIMEOUT_S,
                 log: logging.Logger | None = None) -> None:
        if max_pending < 1 or auth_timeout_s <= 0:
            raise ValueError("max_pending must be >= 1 and auth_timeout_s > 0")
        self._sock = listener
        self._sock.setblocking(False)
        self._challenge = challenge
        self._token = token
        self._admit_cb = admit
        self._refusal = refusal
        self.name = name
        self._max_pending = max_pending
        self._auth_timeout = auth_timeout_s
        self._log = log or logging.getLogger(__name__)
        self._stop = threading.Event()
        self._pending: OrderedDict[socket.socket, _Pending] = OrderedDict()  # oldest first
        self._by_source: dict[str, OrderedDict[socket.socket, None]] = {}  # the same, per peer address
        self._stats = dict.fromkeys(_COUNTERS, 0)
        self._seen: set[str] = set()
        self._logged: dict[str, int] = {}
        self._last_log = time.monotonic()

    # -- public ------------------------------------------------------------------------------------
    def stats(self) -> dict[str, int]:
        """Counters since start, and ``pending``: unauthenticated connections open now."""
        return {**self._stats, "pending": len(self._pending)}

    def note(self, what: str) -> None:
        """Log the first event of a kind at once, later ones as counts every ``LOG_EVERY_S``."""
        if what not in self._seen:
            self._seen.add(what)
            self._log.warning("%s: %s", self.name, what)
            return
        self._logged[what] = self._logged.get(what, 0) + 1
        self._log_summary()

    def serve_forever(self) -> None:
        sel = selectors.DefaultSelector()
        listening = False
        resume_at = 0.0  # accepting paused until then (out of descriptors)
        backoff = ACCEPT_BACKOFF_S[0]
        try:
            while not self._stop.is_set():
                try:
                    now = time.monotonic()
                    if not listening and now >= resume_at:
                        sel.register(self._sock, selectors.EVENT_READ, None)
                        listening = True
                    timeout = 0.2
                    if self._pending:
                        timeout = min(timeout, max(0.0, next(iter(self._pending.values())).deadline - now))
                    if not listening:
                        timeout = min(timeout, max(0.0, resume_at - now))
                    for key, _ in sel.select(timeout):
                        if key.data is None:
                            paused = self._accept_ready(sel)
                            if paused:
                                sel.unregister(self._sock)
                                listening = False
                                resume_at = time.monotonic() + backoff
                                backoff = min(backoff * 2, ACCEPT_BACKOFF_S[1])
                            else:
                                backoff = ACCEPT_BACKOFF_S[0]
                        else:
                            self._advance(sel, key.fileobj)  # type: ignore[arg-type]
                    self._expire(sel, time.monotonic())
                    self._log_summary()
                except Exception:  # the loop must outlive anything a peer can cause
                    if self._stop.is_set():
                        break
                    self._stats["loop_errors"] += 1
                    self._log.exception("%s: error in the accept loop (continuing)", self.name)
                    time.sleep(0.05)
        finally:
            for conn in list(self._pending):
                self._drop(sel, conn)
            sel.close()

    def stop(self) -> None:
        """Stop accepting (the loop ends within ~0.2 s) and close the listening socket."""
        self._stop.set()
        self._sock.close()

    # -- unauthenticated connections ------------------------------------------------------------------
    def _accept_ready(self, sel: selectors.BaseSelector) -> bool:
        """Accept what is waiting; True when accepting must pause (out of descriptors, none to free)."""
        for _ in range(ACCEPT_BATCH):
            try:
                conn, peer = self._sock.accept()
            except BlockingIOError:
                return False
            except OSError as e:
                if self._stop.is_set():
                    return False
                if e.errno in _OUT_OF_FDS:
                    self._stats["out_of_fds"] += 1
                    self.note(f"accept: {errno.errorcode.get(e.errno, e.errno)} ({e.strerror})")
                    if self._pending:
                        self._evict_oldest(sel)  # frees a descriptor: the next accept can succeed
                        continue
                    return True
                self._stats["accept_errors"] += 1  # ECONNABORTED, EPROTO, ...: that peer's problem
                self.note(f"accept: {e}")
                continue
            self._stats["accepted"] += 1
            try:
                self._challenge_new(sel, conn, str(peer[0]))
            except BaseException:
                self._forget(conn)
                conn.close()
                raise
        return False

    def _challenge_new(self, sel: selectors.BaseSelector, conn: socket.socket, source: str) -> None:
        conn.setblocking(False)
        while len(self._pending) >= self._max_pending:
            self._evict_oldest(sel)
        nonce, challenge = self._challenge.new()
        try:
            sent = conn.send(challenge)  # an empty send buffer always takes a few dozen bytes
        except OSError:
            sent = 0
        if sent != len(challenge):
            conn.close()
            return
        self._pending[conn] = _Pending(nonce, time.monotonic() + self._auth_timeout, source)
        self._by_source.setdefault(source, OrderedDict())[conn] = None
        sel.register(conn, selectors.EVENT_READ, True)

    def _evict_oldest(self, sel: selectors.BaseSelector) -> None:
        """Close the oldest pending connection of the address holding the most (ties: the oldest)."""
        most = max(len(c) for c in self._by_source.values())
        for p in self._pending.values():  # oldest first
            if len(self._by_source[p.source]) == most:
                conn = next(iter(self._by_source[p.source]))
                break
        self._stats["evicted"] += 1
        self.note("evicted unauthenticated connections (over the cap)")
        self._drop(sel, conn)

    def _forget(self, conn: socket.socket) -> _Pending | None:
        p = self._pending.pop(conn, None)
        if p is not None:
            mine = self._by_source[p.source]
            del mine[conn]
            if not mine:
                del self._by_source[p.source]
        return p

    def _drop(self, sel: selectors.BaseSelector, conn: socket.socket) -> None:
        self._forget(conn)
        try:
            sel.unregister(conn)
        except (KeyError, ValueError):
            pass
        conn.close()

    def _expire(self, sel: selectors.BaseSelector, now: float) -> None:
        while self._pending:
            conn, p = next(iter(self._pending.items()))
            if p.deadline > now:
                return
            self._stats["timed_out"] += 1
            self.note("closed unauthenticated connections (no answer in time)")
            self._drop(sel, conn)

    def _advance(self, sel: selectors.BaseSelector, conn: socket.socket) -> None:
        p = self._pending.get(conn)
        if p is None:
            return
        try:
            data = conn.recv(MAC_BYTES - len(p.got))
        except BlockingIOError:
            return
        except OSError:
            self._drop(sel, conn)
            return
        if not data:
            self._drop(sel, conn)
            return
        p.got += data
        if len(p.got) < MAC_BYTES:
            return
        self._forget(conn)
        sel.unregister(conn)
        if not self._challenge.ok(self._token, p.nonce, bytes(p.got)):
            self._stats["auth_failed"] += 1
            self.note("refused connections with a bad token")
            self.refuse(conn, "unauthenticated: bad token")
            return
        self._stats["authenticated"] += 1
        try:
            conn.setblocking(True)
            self._admit_cb(conn, p.source)
        except BaseException:
            conn.close()
            raise

    def refuse(self, conn: socket.socket, message: str) -> None:
        """Send the server's refusal (small: it fits an empty send buffer, never blocks) and close."""
        try:
            conn.setblocking(False)
            conn.send(self._refusal(message))
        except OSError:
            pass
        conn.close()

    def _log_summary(self) -> None:
        now = time.monotonic()
        if not self._logged or now - self._last_log < LOG_EVERY_S:
            return
        self._last_log = now
        for what, n in self._logged.items():
            self._log.warning("%s: %s (x%d since the last report)", self.name, what, n)
        self._logged.clear()
