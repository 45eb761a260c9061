"""The agent's control server: bounded, authenticated first, and an accept loop that never dies.

The accept loop and every *unauthenticated* connection belong to a :class:`testbed.netguard.Gate`
(shared with the transfer server): the challenge of :mod:`testbed.agent.wire`, a cap of
``max_pending`` such connections with fair per-address eviction, ``auth_timeout_s`` to answer,
an ``unauthenticated`` error for a wrong answer, and a loop that survives EMFILE/ENFILE and any
other error (see :mod:`testbed.netguard.gate`).

An authenticated connection gets a thread that reads framed requests (size and JSON depth bounded,
:func:`testbed.agent.protocol.decode_body`) and answers each; at most ``max_authenticated`` exist
(only token holders reach that cap). Handlers are called one at a time (a lock), so commands on
the same agent never interleave; a handler that raises :class:`RequestRefused` or any
``TestbedError`` produces an error response and the connection stays usable. :meth:`stats` counts
what happened.
"""

from __future__ import annotations

import logging
import socket
import threading
from typing import Callable

from testbed.agent.protocol import Handler, RequestRefused, decode_body, error, ok
from testbed.agent.wire import CHALLENGE, MAX_REQUEST_BYTES, FrameTooLarge, WireError, frame, read_frame
from testbed.errors import TestbedError
from testbed.netguard.fdlimit import raise_fd_limit
from testbed.netguard.gate import AUTH_TIMEOUT_S, LISTEN_BACKLOG, MAX_PENDING, Gate

__all__ = ["ControlServer", "raise_fd_limit"]

log = logging.getLogger(__name__)

MAX_AUTHENTICATED = 16


class ControlServer:
    def __init__(self, host: str, port: int, token: str, handlers: dict[str, Handler],
                 socket_factory: Callable[..., socket.socket] = socket.socket, *,
                 max_pending: int = MAX_PENDING, max_authenticated: int = MAX_AUTHENTICATED,
                 auth_timeout_s: float = AUTH_TIMEOUT_S):
        if max_pending < 1 or max_authenticated < 1 or auth_timeout_s <= 0:
            raise ValueError("max_pending and max_authenticated must be >= 1 and auth_timeout_s > 0")
        self._handlers = handlers
        self._max_authed = max_authenticated
        self._lock = threading.Lock()  # one command at a time
        sock = socket_factory(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
            sock.listen(LISTEN_BACKLOG)
        except BaseException:
            sock.close()
            raise
        self.port = sock.getsockname()[1]
        self._stop = threading.Event()
        self._gate = Gate(sock, CHALLENGE, token, self._admit, lambda message: frame(error(message)),
                          name="control server", max_pending=max_pending, auth_timeout_s=auth_timeout_s, log=log)
        self._authed: set[socket.socket] = set()
        self._authed_lock = threading.Lock()
        self._refused_busy = 0

    # -- public ------------------------------------------------------------------------------------
    def stats(self) -> dict[str, int]:
        """Counters since start, and the connections open now (``pending``, ``authenticated_now``)."""
        with self._authed_lock:
            authed = len(self._authed)
        return {**self._gate.stats(), "refused_busy": self._refused_busy, "authenticated_now": authed}

    def serve_forever(self) -> None:
        self._gate.serve_forever()

    def stop(self) -> None:
        self._stop.set()
        self._gate.stop()
        with self._authed_lock:
            conns = list(self._authed)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)  # wakes its thread
            except OSError:
                pass

    def _admit(self, conn: socket.socket, source: str) -> None:
        """An authenticated connection (on the gate's thread): a thread of its own, or busy."""
        with self._authed_lock:
            busy = len(self._authed) >= self._max_authed
            if not busy:
                self._authed.add(conn)
        if busy:
            self._refused_busy += 1
            self._gate.refuse(conn, f"agent busy: {self._max_authed} authenticated connections already open")
            return
        try:
            threading.Thread(target=self._serve, args=(conn,), name="tb-agent-conn", daemon=True).start()
        except RuntimeError:  # no thread to be had
            with self._authed_lock:
                self._authed.discard(conn)
            self._gate.refuse(conn, "agent busy: cannot start a connection thread")

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
        except RequestRefused as e:
            return error(str(e))
        handler = self._handlers.get(cmd)
        if handler is None:
            return error(f"command {cmd!r} is not supported by this agent")
        with self._lock:
            try:
                return ok(handler(args))
            except (RequestRefused, TestbedError) as e:
                return error(f"{cmd}: {e}")
            except Exception as e:  # a bug in a handler: say so, keep serving
                log.exception("control server: handler %s failed", cmd)
                return error(f"{cmd}: internal error in the agent: {e.__class__.__name__}: {e}")
