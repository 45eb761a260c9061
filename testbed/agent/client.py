"""Controller side of the control plane: one connection per agent, one request at a time."""

from __future__ import annotations

import json
import socket
import threading
from typing import Any, Callable

from testbed.errors import TestbedError


class AgentError(TestbedError):
    """The agent refused a command or could not be reached."""


class AgentClient:
    def __init__(self, host: str, port: int, token: str, *, timeout_s: float = 60.0,
                 socket_factory: Callable[..., socket.socket] = socket.socket):
        self.host, self.port = host, port
        self._token = token
        self._timeout = timeout_s
        self._factory = socket_factory
        self._sock: socket.socket | None = None
        self._rfile = None
        self._lock = threading.Lock()

    def _connect(self) -> None:
        s = self._factory(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(self._timeout)
        s.connect((self.host, self.port))
        self._sock, self._rfile = s, s.makefile("rb")

    def call(self, cmd: str, **args: Any) -> dict[str, Any]:
        req = (json.dumps({"token": self._token, "cmd": cmd, "args": args}) + "\n").encode()
        with self._lock:
            try:
                if self._sock is None:
                    self._connect()
                self._sock.sendall(req)  # type: ignore[union-attr]
                line = self._rfile.readline()  # type: ignore[union-attr]
            except OSError as e:
                self.close()
                raise AgentError(f"agent {self.host}:{self.port} unreachable during {cmd}: {e}") from e
            if not line:
                self.close()
                raise AgentError(f"agent {self.host}:{self.port} closed the connection during {cmd}")
        resp = json.loads(line)
        if not resp.get("ok"):
            raise AgentError(resp.get("error", "unknown error"))
        return resp["result"]

    def close(self) -> None:
        if self._rfile is not None:
            self._rfile.close()
        if self._sock is not None:
            self._sock.close()
        self._sock = self._rfile = None
