"""Controller side of the control plane: one connection per agent, one request at a time.

Connecting (TCP connect, the agent's challenge, our HMAC answer, its acknowledgement; see
:mod:`testbed.agent.wire`) changes nothing at the agent, so it is retried with a short back-off
until ``connect_timeout_s`` has passed: a connection the agent dropped under a flood of
unauthenticated peers is simply made again. A request is never re-sent (it may have run): a
connection lost during a call is an :class:`AgentError` naming the command; the next call
connects anew. An agent that cannot be reached at all gives one clear error.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from typing import Any, Callable

from testbed.agent.wire import (
    CHALLENGE_BYTES, MAX_RESPONSE_BYTES, WireError, auth_mac, frame, parse_challenge, read_frame, recv_exact,
)
from testbed.errors import TestbedError

CONNECT_TIMEOUT_S = 15.0
RETRY_BACKOFF_S = (0.05, 1.0)


class AgentError(TestbedError):
    """The agent refused a command or could not be reached."""


class _Refused(Exception):
    """The agent answered the handshake with an error (not worth retrying)."""


class AgentClient:
    def __init__(self, host: str, port: int, token: str, *, timeout_s: float = 60.0,
                 connect_timeout_s: float = CONNECT_TIMEOUT_S,
                 socket_factory: Callable[..., socket.socket] = socket.socket):
        self.host, self.port = host, port
        self._token = token
        self._timeout = timeout_s
        self._connect_timeout = connect_timeout_s
        self._factory = socket_factory
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()

    @property
    def _where(self) -> str:
        return f"agent {self.host}:{self.port}"

    def _connect(self) -> None:
        deadline = time.monotonic() + self._connect_timeout
        backoff, tries = RETRY_BACKOFF_S[0], 0
        while True:
            tries += 1
            try:
                self._sock = self._handshake(max(0.1, deadline - time.monotonic()))
                return
            except _Refused as e:
                raise AgentError(f"{self._where} refused the connection: {e}") from None
            except (OSError, WireError) as e:
                cause = "no answer (timed out)" if isinstance(e, TimeoutError) else str(e)
            if time.monotonic() + backoff >= deadline:
                raise AgentError(f"{self._where} unreachable: {cause} "
                                 f"({tries} attempt(s) in {self._connect_timeout:g} s)")
            time.sleep(backoff)
            backoff = min(2 * backoff, RETRY_BACKOFF_S[1])

    def _handshake(self, timeout_s: float) -> socket.socket:
        s = self._factory(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.settimeout(min(timeout_s, 5.0))
            s.connect((self.host, self.port))
            nonce = parse_challenge(recv_exact(s, CHALLENGE_BYTES))
            s.sendall(auth_mac(self._token, nonce))
            ack = _decode(read_frame(s, MAX_RESPONSE_BYTES))
            if not ack.get("ok"):
                raise _Refused(ack.get("error", "no reason given"))
            s.settimeout(self._timeout)
            return s
        except BaseException:
            s.close()
            raise

    def call(self, cmd: str, **args: Any) -> dict[str, Any]:
        req = frame(json.dumps({"cmd": cmd, "args": args}).encode())
        with self._lock:
            if self._sock is None:
                self._connect()
            try:
                self._sock.sendall(req)  # type: ignore[union-attr]
                body = read_frame(self._sock, MAX_RESPONSE_BYTES)  # type: ignore[arg-type]
            except TimeoutError:
                self.close()
                raise AgentError(f"{self._where}: no answer to {cmd} within {self._timeout:g} s") from None
            except (OSError, WireError) as e:
                self.close()
                raise AgentError(f"{self._where}: connection lost during {cmd}: {e}") from None
        try:
            resp = _decode(body)
        except WireError as e:
            raise AgentError(f"{self._where}: bad answer to {cmd}: {e}") from None
        if not resp.get("ok"):
            raise AgentError(str(resp.get("error", "unknown error")))
        return resp.get("result", {})

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
        self._sock = None


def _decode(body: bytes) -> dict:
    try:
        msg = json.loads(body)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise WireError("the agent's answer is not JSON") from None
    if not isinstance(msg, dict):
        raise WireError("the agent's answer is not a JSON object")
    return msg
