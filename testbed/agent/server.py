"""The agent's control server: bounded, authenticated first, and an accept loop that never dies.

One thread (:meth:`ControlServer.serve_forever`) accepts connections and runs every
*unauthenticated* one through the handshake of :mod:`testbed.agent.wire` with a selector: such a
connection costs one file descriptor and a few bytes, never a thread, and

- at most ``max_pending`` of them exist at once; a new one over the cap evicts the oldest
  connection of the source address that holds the most (a fair share per address: a flood from
  one address, however fast it reconnects, only evicts its own connections, so the controller's
  single connection gets through; a flood from many addresses evicts the oldest among the biggest
  holders, and the controller's connection answers the challenge within a round trip);
- each has ``auth_timeout_s`` to answer the challenge, then it is closed;
- a wrong answer gets an ``unauthenticated`` error and the connection is closed.

An authenticated connection gets a thread that reads framed requests (size and JSON depth bounded,
:func:`testbed.agent.protocol.decode_body`) and answers each; at most ``max_authenticated`` exist
(only token holders reach that cap). Handlers are called one at a time (a lock), so commands on
the same agent never interleave; a handler that raises :class:`ProtocolError` or any
``TestbedError`` produces an error response and the connection stays usable.

The accept loop survives every error: out of file descriptors (EMFILE/ENFILE) it frees the oldest
pending connection and retries, or pauses accepting with a growing back-off when there is none to
free; anything else is logged and the loop goes on. :meth:`stats` counts what happened.
"""

from __future__ import annotations

import errno
import logging
import resource
import selectors
import socket
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Callable

from testbed.agent.protocol import Handler, ProtocolError, decode_body, error, ok
from testbed.agent.wire import (
    MAC_BYTES, MAX_REQUEST_BYTES, FrameTooLarge, WireError, auth_ok, frame, new_challenge, read_frame,
)
from testbed.errors import TestbedError

log = logging.getLogger(__name__)

MAX_PENDING = 64
MAX_AUTHENTICATED = 16
AUTH_TIMEOUT_S = 5.0
LISTEN_BACKLOG = 1024  # the kernel caps it at net.core.somaxconn
ACCEPT_BACKOFF_S = (0.01, 1.0)  # first and longest pause of accepting while out of descriptors
LOG_EVERY_S = 5.0  # floods are summarised in the log at most this often
_OUT_OF_FDS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)


def raise_fd_limit() -> tuple[int, int]:
    """Raise this process's RLIMIT_NOFILE soft limit to its hard limit; returns ``(soft, hard)``."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard
    if hard == resource.RLIM_INFINITY:
        try:
            with open("/proc/sys/fs/nr_open") as f:
                target = int(f.read())
        except (OSError, ValueError):
            return soft, hard
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (OSError, ValueError) as e:
            log.warning("could not raise RLIMIT_NOFILE from %d to %d: %s", soft, target, e)
    return soft, hard


@dataclass
class _Pending:
    nonce: bytes
    deadline: float
    source: str
    got: bytearray = field(default_factory=bytearray)


class ControlServer:
    def __init__(self, host: str, port: int, token: str, handlers: dict[str, Handler],
                 socket_factory: Callable[..., socket.socket] = socket.socket, *,
                 max_pending: int = MAX_PENDING, max_authenticated: int = MAX_AUTHENTICATED,
                 auth_timeout_s: float = AUTH_TIMEOUT_S):
        if max_pending < 1 or max_authenticated < 1 or auth_timeout_s <= 0:
            raise ValueError("max_pending and max_authenticated must be >= 1 and auth_timeout_s > 0")
        self._token = token
        self._handlers = handlers
        self._max_pending = max_pending
        self._max_authed = max_authenticated
        self._auth_timeout = auth_timeout_s
        self._lock = threading.Lock()  # one command at a time
        self._sock = socket_factory(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, port))
        self._sock.listen(LISTEN_BACKLOG)
        self._sock.setblocking(False)
        self.port = self._sock.getsockname()[1]
        self._stop = threading.Event()
        self._pending: OrderedDict[socket.socket, _Pending] = OrderedDict()  # oldest first
        self._by_source: dict[str, OrderedDict[socket.socket, None]] = {}  # the same, per peer address
        self._authed: set[socket.socket] = set()
        self._authed_lock = threading.Lock()
        self._stats = {"accepted": 0, "authenticated": 0, "evicted": 0, "timed_out": 0, "auth_failed": 0,
                       "refused_busy": 0, "accept_errors": 0, "out_of_fds": 0, "loop_errors": 0}
        self._seen: set[str] = set()
        self._logged: dict[str, int] = {}
        self._last_log = time.monotonic()

    # -- public ------------------------------------------------------------------------------------
    def stats(self) -> dict[str, int]:
        """Counters since start, and the connections open now (``pending``, ``authenticated_now``)."""
        with self._authed_lock:
            authed = len(self._authed)
        return {**self._stats, "pending": len(self._pending), "authenticated_now": authed}

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
                    log.exception("control server: error in the accept loop (continuing)")
                    time.sleep(0.05)
        finally:
            for conn in list(self._pending):
                self._drop(sel, conn)
            sel.close()

    def stop(self) -> None:
        self._stop.set()
        self._sock.close()
        with self._authed_lock:
            conns = list(self._authed)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)  # wakes its thread
            except OSError:
                pass

    # -- unauthenticated connections ------------------------------------------------------------------
    def _accept_ready(self, sel: selectors.BaseSelector) -> bool:
        """Accept what is waiting; True when accepting must pause (out of descriptors, none to free)."""
        for _ in range(256):  # then let the pending ones and the deadlines have a turn
            try:
                conn, peer = self._sock.accept()
            except BlockingIOError:
                return False
            except OSError as e:
                if self._stop.is_set():
                    return False
                if e.errno in _OUT_OF_FDS:
                    self._stats["out_of_fds"] += 1
                    self._note(f"accept: {errno.errorcode.get(e.errno, e.errno)} ({e.strerror})")
                    if self._pending:
                        self._evict_oldest(sel)  # frees a descriptor: the next accept can succeed
                        continue
                    return True
                self._stats["accept_errors"] += 1  # ECONNABORTED, EPROTO, ...: that peer's problem
                self._note(f"accept: {e}")
                continue
            self._stats["accepted"] += 1
            try:
                self._admit(sel, conn, str(peer[0]))
            except BaseException:
                self._forget(conn)
                conn.close()
                raise
        return False

    def _admit(self, sel: selectors.BaseSelector, conn: socket.socket, source: str) -> None:
        conn.setblocking(False)
        while len(self._pending) >= self._max_pending:
            self._evict_oldest(sel)
        nonce, challenge = new_challenge()
        try:
            sent = conn.send(challenge)  # an empty send buffer always takes 20 bytes
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
        self._note("evicted unauthenticated connections (over the cap)")
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
            self._note("closed unauthenticated connections (no answer in time)")
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
        if not auth_ok(self._token, p.nonce, bytes(p.got)):
            self._stats["auth_failed"] += 1
            self._note("refused connections with a bad token")
            self._reject(conn, "unauthenticated: bad token")
            return
        with self._authed_lock:
            busy = len(self._authed) >= self._max_authed
            if not busy:
                self._authed.add(conn)
        if busy:
            self._stats["refused_busy"] += 1
            self._reject(conn, f"agent busy: {self._max_authed} authenticated connections already open")
            return
        self._stats["authenticated"] += 1
        try:
            threading.Thread(target=self._serve, args=(conn,), name="tb-agent-conn", daemon=True).start()
        except RuntimeError:  # no thread to be had
            with self._authed_lock:
                self._authed.discard(conn)
            self._reject(conn, "agent busy: cannot start a connection thread")

    @staticmethod
    def _reject(conn: socket.socket, message: str) -> None:
        try:
            conn.send(frame(error(message)))  # small: fits the empty send buffer, never blocks
        except OSError:
            pass
        conn.close()

    # -- authenticated connections --------------------------------------------------------------------
    def _serve(self, conn: socket.socket) -> None:
        try:
            conn.setblocking(True)
            conn.sendall(frame(ok({"authenticated": True})))
            while not self._stop.is_set():
                try:
                    body = read_frame(conn, MAX_REQUEST_BYTES)
                except FrameTooLarge as e:
                    conn.sendall(frame(error(str(e))))
                    return  # the rest of that frame cannot be skipped cheaply: end the connection
                conn.sendall(frame(self.handle(body)))
        except (OSError, WireError):
            pass
        except Exception:
            log.exception("control server: connection thread failed")
        finally:
            with self._authed_lock:
                self._authed.discard(conn)
            conn.close()

    def handle(self, body: bytes) -> bytes:
        """The response body to one request body from an authenticated connection."""
        try:
            cmd, args = decode_body(body)
        except ProtocolError as e:
            return error(str(e))
        handler = self._handlers.get(cmd)
        if handler is None:
            return error(f"command {cmd!r} is not supported by this agent")
        with self._lock:
            try:
                return ok(handler(args))
            except (ProtocolError, TestbedError) as e:
                return error(f"{cmd}: {e}")
            except Exception as e:  # a bug in a handler: say so, keep serving
                log.exception("control server: handler %s failed", cmd)
                return error(f"{cmd}: internal error in the agent: {e.__class__.__name__}: {e}")

    # -- logging ------------------------------------------------------------------------------------
    def _note(self, what: str) -> None:
        """Log the first event of a kind at once, later ones as counts every ``LOG_EVERY_S``."""
        if what not in self._seen:
            self._seen.add(what)
            log.warning("control server: %s", what)
            return
        self._logged[what] = self._logged.get(what, 0) + 1
        self._log_summary()

    def _log_summary(self) -> None:
        now = time.monotonic()
        if not self._logged or now - self._last_log < LOG_EVERY_S:
            return
        self._last_log = now
        for what, n in self._logged.items():
            log.warning("control server: %s (x%d since the last report)", what, n)
        self._logged.clear()
