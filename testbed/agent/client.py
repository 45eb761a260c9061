"""Controller side of the control plane: one connection per agent, one request at a time.

Connecting (TCP connect, the agent's challenge, our HMAC answer, its acknowledgement; see
:mod:`testbed.agent.wire`) changes nothing at the agent, so it is retried with a short back-off
until ``connect_timeout_s`` has passed: a connection the agent dropped under a flood of
unauthenticated peers is simply made again. A request is never re-sent (it may have run): a
connection lost during a call is an :class:`AgentError` naming the command; the next call
connects anew. An agent that cannot be reached at all gives one clear error.

One method per command of :mod:`testbed.agent.protocol` (same name, same arguments, a typed answer
from :mod:`testbed.agent.results`); :meth:`AgentClient.call` is the transport under them.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from typing import Any, Callable, TypeVar

from testbed.agent.wire import (
    CHALLENGE_BYTES, MAX_RESPONSE_BYTES, WireError, auth_mac, frame, parse_challenge, read_frame, recv_exact,
)
from testbed.agent.results import (
    AgentInfo, Checkpoint, CheckpointSent, JobStatus, MissingField, Resumed, ThroughputSet,
)
from testbed.errors import TestbedError
from testbed import step_profile

CONNECT_TIMEOUT_S = 15.0
RETRY_BACKOFF_S = (0.05, 1.0)
T = TypeVar("T")


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

    def call(self, cmd: str, *, timeout_s: float | None = None, **args: Any) -> dict[str, Any]:
        """Send ``cmd`` and wait for its answer: ``timeout_s`` (default: the client's) for a command
        whose work grows with its input, such as a transfer."""
        req = frame(json.dumps({"cmd": cmd, "args": args}).encode())
        wait_s = self._timeout if timeout_s is None else max(self._timeout, timeout_s)
        with step_profile.command(cmd), self._lock:
            if self._sock is None:
                self._connect()
            try:
                self._sock.settimeout(wait_s)  # type: ignore[union-attr]
                self._sock.sendall(req)  # type: ignore[union-attr]
                body = read_frame(self._sock, MAX_RESPONSE_BYTES)  # type: ignore[arg-type]
            except TimeoutError:
                self.close()
                raise AgentError(f"{self._where}: no answer to {cmd} within {wait_s:g} s") from None
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

    # -- the commands, typed ------------------------------------------------------------------------
    def _ask(self, parse: Callable[[dict[str, Any]], T], cmd: str, *, timeout_s: float | None = None,
             **args: Any) -> T:
        """``cmd`` with the arguments given (None: the agent's default), its answer parsed."""
        answer = self.call(cmd, timeout_s=timeout_s, **{k: v for k, v in args.items() if v is not None})
        try:
            return parse(answer)
        except MissingField as e:
            raise AgentError(f"{self._where}: bad answer to {cmd}: no {e.args[0]!r}") from None
        except (TypeError, ValueError, AttributeError) as e:
            raise AgentError(f"{self._where}: bad answer to {cmd}: {e}") from None

    def ping(self) -> AgentInfo:
        return self._ask(AgentInfo.parse, "ping")

    def start_job(self, job_id: str, *, family: str, seed: int, max_steps: int | None = None,
                  steps_per_s: float | None = None, model_mb: float | None = None,
                  program: dict | None = None) -> JobStatus:
        return self._ask(JobStatus.parse, "start_job", job_id=job_id, family=family, seed=seed,
                         max_steps=max_steps, steps_per_s=steps_per_s, model_mb=model_mb, program=program)

    def status(self, job_id: str) -> JobStatus:
        return self._ask(JobStatus.parse, "status", job_id=job_id)

    def losses(self, job_id: str) -> list[float]:
        return self._ask(lambda a: list(a["losses"]) if "losses" in a else _missing("losses"), "losses",
                         job_id=job_id)

    def checkpoint_and_pause(self, job_id: str) -> Checkpoint:
        return self._ask(Checkpoint.parse, "checkpoint_and_pause", job_id=job_id)

    def send_checkpoint(self, job_id: str, *, dst_addr: str, dst_port: int, transfer_id: str,
                        ballast_bytes: int | None = None, deadline_s: float | None = None,
                        timeout_s: float | None = None) -> CheckpointSent:
        """``timeout_s``: how long to wait for the transfer's report (at least the client's timeout);
        the caller sizes it from the bytes and the link's rate."""
        return self._ask(CheckpointSent.parse, "send_checkpoint", timeout_s=timeout_s, job_id=job_id,
                         dst_addr=dst_addr, dst_port=dst_port, ballast_bytes=ballast_bytes,
                         transfer_id=transfer_id, deadline_s=deadline_s)

    def load_and_resume(self, job_id: str, *, transfer_id: str, sha256: str, steps_per_s: float | None = None,
                        max_steps: int | None = None, checkpoint_bytes: int | None = None,
                        program: dict | None = None, seed: int | None = None) -> Resumed:
        return self._ask(Resumed.parse, "load_and_resume", job_id=job_id, transfer_id=transfer_id, sha256=sha256,
                         steps_per_s=steps_per_s, max_steps=max_steps, checkpoint_bytes=checkpoint_bytes,
                         program=program, seed=seed)

    def resume(self, job_id: str) -> JobStatus:
        return self._ask(JobStatus.parse, "resume", job_id=job_id)

    def free(self, job_id: str) -> None:
        self.call("free", job_id=job_id)

    def set_throughput(self, job_id: str, *, frac: float, cap_w: float | None = None) -> ThroughputSet:
        return self._ask(lambda a: ThroughputSet.parse(a, frac), "set_throughput", job_id=job_id, frac=frac,
                         cap_w=cap_w)

    def set_throughputs(self, items: list[tuple[str, float, float | None]]) -> list[ThroughputSet | AgentError]:
        """``set_throughput`` for each ``(job_id, frac, cap_w)`` in one round trip; per item its answer,
        or the AgentError that refused it alone (a lost connection raises, as any command)."""
        answer = self.call("set_throughputs", items=[
            {"job_id": j, "frac": f, **({"cap_w": c} if c is not None else {})} for j, f, c in items])
        results = answer.get("results")
        if not isinstance(results, list) or len(results) != len(items):
            raise AgentError(f"{self._where}: bad answer to set_throughputs: {len(items)} results expected")
        out: list[ThroughputSet | AgentError] = []
        for (_, frac, _), r in zip(items, results):
            if not isinstance(r, dict):
                raise AgentError(f"{self._where}: bad answer to set_throughputs: a result is not an object")
            if not r.get("ok"):
                out.append(AgentError(str(r.get("error", "unknown error"))))
                continue
            try:
                out.append(ThroughputSet.parse(r.get("result") or {}, frac))
            except (TypeError, ValueError, AttributeError) as e:
                raise AgentError(f"{self._where}: bad answer to set_throughputs: {e}") from None
        return out

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
        self._sock = None


def _missing(key: str):
    raise MissingField(key)


def _decode(body: bytes) -> dict:
    try:
        msg = json.loads(body)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise WireError("the agent's answer is not JSON") from None
    if not isinstance(msg, dict):
        raise WireError("the agent's answer is not a JSON object")
    return msg
