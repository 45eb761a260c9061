"""Node agents survive hostile peers on the management network (issue 12, bullet 6): floods of idle
connections, peers that never authenticate, deep or huge messages, wrong tokens, and running out
of file descriptors. Everything on 127.0.0.1."""

from __future__ import annotations

import errno
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from testbed.agent.client import AgentClient, AgentError
from testbed.agent.server import ControlServer
from testbed.agent.wire import (
    CHALLENGE_BYTES, MAX_JSON_DEPTH, MAX_REQUEST_BYTES, auth_mac, frame, json_depth_exceeds, parse_challenge,
    read_frame, recv_exact,
)
from tests.agent_flood import FlakyListener, Flood, sustained
from tests.unit.fd_limit import raise_own_fd_limit

TOKEN = "t" * 32
FLOOD = 2000


# -- helpers ------------------------------------------------------------------------------------------
def _authenticated(port: int, token: str = TOKEN) -> socket.socket:
    """A raw authenticated connection (handshake done by hand)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    nonce = parse_challenge(recv_exact(s, CHALLENGE_BYTES))
    s.sendall(auth_mac(token, nonce))
    assert json.loads(read_frame(s, 1 << 20))["ok"] is True
    return s


def _ask(s: socket.socket, body: bytes) -> dict:
    s.sendall(frame(body))
    return json.loads(read_frame(s, 1 << 20))


@pytest.fixture
def server():
    """An in-process control server with a ping handler; ``make(**kw)`` starts one."""
    made = []

    def make(**kw) -> ControlServer:
        calls: list = []
        srv = ControlServer("127.0.0.1", 0, TOKEN, {"ping": lambda a: calls.append("ping") or {"pong": True}}, **kw)
        srv.calls = calls  # type: ignore[attr-defined]
        th = threading.Thread(target=srv.serve_forever, daemon=True)
        th.start()
        srv.thread = th  # type: ignore[attr-defined]
        made.append(srv)
        return srv

    yield make
    for srv in made:
        srv.stop()
        srv.thread.join(timeout=5)  # type: ignore[attr-defined]
        assert not srv.thread.is_alive()  # type: ignore[attr-defined]


class AgentProcess:
    def __init__(self, tmp: Path, nofile: int | None = None):
        tmp.mkdir(parents=True, exist_ok=True)
        (tmp / "token").write_text(TOKEN)
        self.ready = tmp / "ready"
        self.log = tmp / "agent.log"
        argv = [sys.executable, "-m", "testbed.agent", "--site", "x", "--mgmt-addr", "127.0.0.1", "--port", "0",
                "--wan-addr", "127.0.0.1", "--transfer-port", "0", "--token-file", str(tmp / "token"),
                "--workdir", str(tmp / "work"), "--ready-file", str(self.ready)]

        def limit() -> None:
            if nofile is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         preexec_fn=limit)
        deadline = time.monotonic() + 60
        while not self.ready.exists():
            assert self.proc.poll() is None, self.log.read_text()
            assert time.monotonic() < deadline, "agent not ready"
            time.sleep(0.05)
        self.port = int(self.ready.read_text().split()[1])

    def open_fds(self) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def agent(tmp_path):
    procs: list[AgentProcess] = []

    def start(**kw) -> AgentProcess:
        procs.append(AgentProcess(tmp_path / f"agent{len(procs)}", **kw))
        return procs[-1]

    yield start
    for p in procs:
        p.stop()


# -- the flood -----------------------------------------------------------------------------------------
def test_flood_of_idle_connections_leaves_the_agent_serving(agent):
    """2,000 idle unauthenticated connections to a real agent process: it accepts them all, holds no
    more than its cap, and its controller still gets correct answers."""
    raise_own_fd_limit(FLOOD + 256)
    a = agent()
    baseline = a.open_fds()
    flood = Flood(("127.0.0.1", a.port), FLOOD)
    try:
        assert flood.seen["challenged"] + flood.seen["closed_unchallenged"] == FLOOD
        assert a.open_fds() <= baseline + 64 + 4  # the pending cap, not 2,000
        assert flood.still_open() <= 64
        client = AgentClient("127.0.0.1", a.port, TOKEN, connect_timeout_s=10)
        for _ in range(3):
            assert client.call("ping") == {"site": "x", "jobs": {}}
        with pytest.raises(AgentError, match="no job 'nope'"):
            client.call("status", job_id="nope")
        client.close()
        assert a.proc.poll() is None
    finally:
        flood.close()
    assert "evicted unauthenticated connections" in a.log.read_text()


def test_flood_while_connected_and_a_sustained_flood_during_reconnects(server):
    """The controller's open connection is untouched by a flood, and fresh connections get through
    while the flood (from another address) keeps re-opening everything the agent closes."""
    raise_own_fd_limit(FLOOD + 256)
    srv = server(max_pending=32)
    client = AgentClient("127.0.0.1", srv.port, TOKEN)
    assert client.call("ping") == {"pong": True}
    flood = Flood(("127.0.0.1", srv.port), FLOOD, source="127.0.0.2")
    try:
        with sustained(flood):
            assert client.call("ping") == {"pong": True}  # the established connection
            for _ in range(5):
                fresh = AgentClient("127.0.0.1", srv.port, TOKEN, connect_timeout_s=20)
                assert fresh.call("ping") == {"pong": True}
                fresh.close()
    finally:
        client.close()
    st = srv.stats()
    assert st["accepted"] >= 2 * FLOOD and st["evicted"] >= 2 * FLOOD - 64 and st["pending"] <= 32
    assert st["authenticated"] == 6 and srv.calls == ["ping"] * 7  # type: ignore[attr-defined]


def test_eviction_takes_from_the_biggest_holder_oldest_first(server):
    srv = server(max_pending=4, auth_timeout_s=60)
    a = Flood(("127.0.0.1", srv.port), 3, source="127.0.0.2")
    b = Flood(("127.0.0.1", srv.port), 1, source="127.0.0.3")
    more = Flood(("127.0.0.1", srv.port), 3, source="127.0.0.2")
    try:
        assert srv.stats()["evicted"] == 3
        assert b.still_open() == 1  # the lone connection of another address is kept
        assert a.still_open() == 0 and more.still_open() == 3  # the flooder lost its oldest
    finally:
        for f in (a, b, more):
            f.close()


def test_idle_unauthenticated_connections_are_closed_after_the_timeout(server):
    srv = server(auth_timeout_s=0.5)
    idle = Flood(("127.0.0.1", srv.port), 10)
    slow = socket.create_connection(("127.0.0.1", srv.port), timeout=10)  # answers 31 of 32 bytes, then stalls
    nonce = parse_challenge(recv_exact(slow, CHALLENGE_BYTES))
    slow.sendall(auth_mac(TOKEN, nonce)[:31])
    client = AgentClient("127.0.0.1", srv.port, TOKEN)
    assert client.call("ping") == {"pong": True}
    try:
        t0 = time.monotonic()
        while idle.still_open() and time.monotonic() - t0 < 10:
            time.sleep(0.05)
        assert idle.still_open() == 0
        assert slow.recv(64) == b""  # closed, never authenticated
        assert srv.stats()["timed_out"] == 11
        time.sleep(0.7)  # longer than the timeout: an authenticated connection is not idle-closed
        sock_before = client._sock
        assert client.call("ping") == {"pong": True} and client._sock is sock_before
    finally:
        idle.close()
        slow.close()
        client.close()


# -- what a peer sends -----------------------------------------------------------------------------------
def test_wrong_token_is_refused_before_anything_is_read(server):
    srv = server()
    with pytest.raises(AgentError, match="refused the connection: unauthenticated: bad token"):
        AgentClient("127.0.0.1", srv.port, "intruder").call("ping")
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    recv_exact(s, CHALLENGE_BYTES)
    s.sendall(b"[" * 100_000)  # JSON instead of an answer: only 32 bytes are read, never parsed
    assert json.loads(read_frame(s, 1 << 20)) == {"ok": False, "error": "unauthenticated: bad token"}
    try:
        assert s.recv(64) == b""  # closed (a reset, as the agent did not read the rest)
    except ConnectionResetError:
        pass
    s.close()
    assert srv.calls == []  # type: ignore[attr-defined]
    assert srv.stats()["auth_failed"] == 2
    good = AgentClient("127.0.0.1", srv.port, TOKEN)
    assert good.call("ping") == {"pong": True}
    good.close()


def test_deeply_nested_and_oversized_messages_are_refused_and_the_server_lives(server):
    srv = server()
    s = _authenticated(srv.port)
    deep = b"[" * 100_000 + b"]" * 100_000
    assert _ask(s, deep)["error"] == f"malformed request: JSON nested deeper than {MAX_JSON_DEPTH} levels"
    deep_args = json.dumps({"cmd": "ping", "args": {"x": 0}}).encode().replace(b"0", b"[" * 50_000 + b"]" * 50_000)
    assert "nested deeper" in _ask(s, deep_args)["error"]
    assert _ask(s, b'{"cmd": "ping"}') == {"ok": True, "result": {"pong": True}}  # same connection, still fine
    s.sendall(frame(b"x" * (MAX_REQUEST_BYTES + 1))[:4])  # a header announcing too much: refused unread
    assert json.loads(read_frame(s, 1 << 20))["error"].startswith("message too large")
    assert s.recv(64) == b""  # and that connection ends
    s.close()
    s2 = _authenticated(srv.port)
    assert _ask(s2, b'{"cmd": "ping"}')["ok"] is True
    assert "not JSON" in _ask(s2, b"\xff\xfe")["error"]
    assert "not a JSON object" in _ask(s2, b"[1]")["error"]
    s2.close()
    assert srv.thread.is_alive() and srv.stats()["loop_errors"] == 0  # type: ignore[attr-defined]


@pytest.mark.parametrize(("text", "deeper"), [
    (b"[" * 33 + b"]" * 33, True),
    (b"[" * 32 + b"]" * 32, False),
    (b'{"a": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}', False),  # brackets inside a string
    (b'["\\"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["]', False),  # after an escaped quote: still in the string
    (b'["\\\\", ' + b"[" * 40 + b"]" * 40 + b"]", True),  # an escaped backslash ends before the quote
    (b"{" * 20 + b"[" * 20, True),
])
def test_json_depth_scan(text, deeper):
    assert json_depth_exceeds(text, 32) is deeper


# -- the accept loop ---------------------------------------------------------------------------------------
def test_accept_loop_survives_errors(server):
    FlakyListener.failures = [OSError(errno.EMFILE, "Too many open files")] * 4 + [
        OSError(errno.ENFILE, "Too many open files in system"), OSError(errno.ECONNABORTED, "aborted"),
        RuntimeError("anything else"),
    ]
    srv = server(socket_factory=FlakyListener)
    client = AgentClient("127.0.0.1", srv.port, TOKEN, connect_timeout_s=20)
    assert client.call("ping") == {"pong": True}
    st = srv.stats()
    assert st["out_of_fds"] == 5 and st["accept_errors"] == 1 and st["loop_errors"] == 1
    assert FlakyListener.failures == [] and srv.thread.is_alive()  # type: ignore[attr-defined]
    client.close()


def test_agent_out_of_file_descriptors_keeps_accepting(agent):
    """A real agent whose open-file limit (soft and hard) is a few above what it needs at start:
    a flood makes accept() fail with EMFILE; the agent frees unauthenticated connections, logs it,
    and its controller still gets answers."""
    raise_own_fd_limit(1000)
    probe = agent()
    need = probe.open_fds()
    probe.stop()
    a = agent(nofile=need + 12)
    flood = Flood(("127.0.0.1", a.port), 300)
    try:
        client = AgentClient("127.0.0.1", a.port, TOKEN, connect_timeout_s=20)
        assert client.call("ping")["site"] == "x"
        client.close()
        assert a.proc.poll() is None
    finally:
        flood.close()
    log = a.log.read_text()
    assert "accept: EMFILE" in log and "Traceback" not in log


# -- the controller's side ----------------------------------------------------------------------------------
def test_unreachable_agent_is_one_clear_error():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there
    with pytest.raises(AgentError, match=rf"agent 127.0.0.1:{port} unreachable: .*refused.*attempt"):
        AgentClient("127.0.0.1", port, TOKEN, connect_timeout_s=0.5).call("ping")


def test_silent_or_foreign_peer_is_a_clear_error():
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(8)  # never accepts, never answers
    port = lst.getsockname()[1]
    with pytest.raises(AgentError, match="unreachable: no answer"):
        AgentClient("127.0.0.1", port, TOKEN, connect_timeout_s=0.5).call("ping")
    lst.close()
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(8)
    port = lst.getsockname()[1]

    def foreign() -> None:
        for _ in range(50):
            try:
                c, _ = lst.accept()
            except OSError:
                return
            c.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")
            c.close()

    th = threading.Thread(target=foreign, daemon=True)
    th.start()
    with pytest.raises(AgentError, match="not a testbed agent"):
        AgentClient("127.0.0.1", port, TOKEN, connect_timeout_s=0.5).call("ping")
    lst.close()
