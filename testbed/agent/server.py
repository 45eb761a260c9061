"""A line-oriented TCP control server: authenticates, validates, dispatches, answers.

A handler that raises :class:`ProtocolError` or any ``TestbedError`` produces an error response;
the connection stays usable. Handlers are called one at a time (a lock), so commands on the
same agent never interleave.
"""

from __future__ import annotations

import socket
import threading
from typing import Callable

from testbed.agent.protocol import MAX_LINE_BYTES, Handler, ProtocolError, decode_request, error, ok
from testbed.errors import TestbedError


class ControlServer:
    def __init__(self, host: str, port: int, token: str, handlers: dict[str, Handler],
                 socket_factory: Callable[..., socket.socket] = socket.socket):
        self._token = token
        self._handlers = handlers
        self._lock = threading.Lock()
        self._sock = socket_factory(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, port))
        self._sock.listen(16)
        self.port = self._sock.getsockname()[1]
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def serve_forever(self) -> None:
        self._sock.settimeout(0.2)
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                break
            th = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            th.start()
            self._threads.append(th)

    def stop(self) -> None:
        self._stop.set()
        self._sock.close()

    def _serve(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rb") as rfile:
            while not self._stop.is_set():
                line = rfile.readline(MAX_LINE_BYTES + 1)
                if not line:
                    return
                conn.sendall(self.handle_line(line))

    def handle_line(self, line: bytes) -> bytes:
        try:
            cmd, args = decode_request(line.strip(), self._token)
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
