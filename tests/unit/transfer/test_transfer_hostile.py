"""The transfer server survives hostile peers on the WAN (issue 12, bullet 6): floods of idle
connections, peers that never authenticate, wrong tokens, garbage, oversized or nested HELLOs,
absurd declared sizes, peers that send more than they declared, and accept() errors. After each,
a legitimate transfer still completes and verifies. Everything on 127.0.0.1."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import resource
import socket
import threading
import time

import pytest

from testbed.netguard.challenge import MAC_BYTES
from testbed.transfer import BallastSource, FileSource, TransferServer, send
from testbed.transfer.protocol import (
    CHALLENGE, CHUNK_HEADER, LEN, MAGIC, MAX_HELLO_BYTES, MSG_ACK, MSG_CHUNK, MSG_NAK, MSG_PROGRESS, SERVER_MSG, Hello,
    recv_exact,
)
from testbed.transfer.server import MAX_NAKS_PER_CHUNK
from tests.agent_flood import FlakyListener, Flood, sustained
from tests.unit.fd_limit import raise_own_fd_limit

TOKEN = "transfer-token-" + "x" * 17
FLOOD = 2000
CHUNK = 64 * 1024


# -- helpers ------------------------------------------------------------------------------------------
def _read_msg(s: socket.socket) -> dict:
    (n,) = LEN.unpack(recv_exact(s, LEN.size))
    return json.loads(recv_exact(s, n))


def _closed(s: socket.socket) -> bool:
    try:
        s.settimeout(10)
        while s.recv(65536):
            pass
        return True
    except ConnectionResetError:
        return True


def _authenticated(port: int, token: str = TOKEN) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    nonce = CHALLENGE.nonce_of(recv_exact(s, CHALLENGE.size))
    assert nonce is not None
    s.sendall(CHALLENGE.mac(token, nonce))
    assert _read_msg(s) == {"ok": True, "authenticated": True}
    return s


def _raw_hello(body: bytes) -> bytes:
    return MAGIC + LEN.pack(len(body)) + body


def _hello(tid: str, size: int, *, chunk: int = CHUNK, store: int = 0) -> Hello:
    return Hello(tid, size, chunk, -(-size // chunk), "0" * 64, "0" * 64, store)


def _files(d) -> list[str]:
    return sorted(p.name for p in d.iterdir())


@pytest.fixture
def ckpt(tmp_path):
    p = tmp_path / "model.pt"
    p.write_bytes(os.urandom(3 * CHUNK + 123))
    return p


def _legit(srv: TransferServer, ckpt, tid: str, **kw):
    """A real transfer that must complete and verify on ``srv``."""
    kw.setdefault("chunk_bytes", CHUNK)
    r = send("127.0.0.1", srv.port, FileSource(ckpt), transfer_id=tid, token=TOKEN, **kw)
    assert r.status == "completed", r.error
    assert (srv.storage_dir / tid).read_bytes() == ckpt.read_bytes()
    assert r.sha256 == hashlib.sha256(ckpt.read_bytes()).hexdigest()
    return r


# -- floods and idle peers ---------------------------------------------------------------------------------
def test_flood_of_idle_connections_then_a_transfer_verifies(start_server, ckpt):
    """2,000 idle connections that never answer the challenge: the server accepts them all, holds no
    more than its cap, allocates nothing for them, and a real transfer still completes and verifies."""
    raise_own_fd_limit(FLOOD + 256)
    srv = start_server()
    flood = Flood(("127.0.0.1", srv.port), FLOOD, challenge=CHALLENGE)
    try:
        assert flood.seen["challenged"] + flood.seen["closed_unchallenged"] == FLOOD
        st = srv.stats()
        assert st["accepted"] == FLOOD and st["pending"] <= 64 and st["evicted"] >= FLOOD - 64
        assert st["connections"] == 0  # no thread for any of them
        assert flood.still_open() <= 64
        r = _legit(srv, ckpt, "after-flood")
        assert r.reconnects == 0
    finally:
        flood.close()
    assert _files(srv.storage_dir) == ["after-flood"]


def test_sustained_flood_from_another_address_during_transfers(start_server, ckpt):
    raise_own_fd_limit(FLOOD + 256)
    srv = start_server(max_pending=32)
    flood = Flood(("127.0.0.1", srv.port), FLOOD, source="127.0.0.2", challenge=CHALLENGE)
    with sustained(flood):
        for i in range(3):
            _legit(srv, ckpt, f"during-{i}")
    st = srv.stats()
    assert st["evicted"] >= 2 * FLOOD - 64 and st["pending"] <= 32 and st["authenticated"] >= 3


def test_idle_and_slow_unauthenticated_peers_are_closed_after_the_timeout(start_server, ckpt):
    srv = start_server(auth_timeout_s=0.5, io_timeout_s=5.0)
    idle = Flood(("127.0.0.1", srv.port), 10, challenge=CHALLENGE)
    slow = socket.create_connection(("127.0.0.1", srv.port), timeout=10)  # answers 31 of 32 bytes, then stalls
    nonce = CHALLENGE.nonce_of(recv_exact(slow, CHALLENGE.size))
    slow.sendall(CHALLENGE.mac(TOKEN, nonce)[:31])
    try:
        t0 = time.monotonic()
        while idle.still_open() and time.monotonic() - t0 < 10:
            time.sleep(0.05)
        assert idle.still_open() == 0
        assert _closed(slow)
        assert srv.stats()["timed_out"] == 11
        _legit(srv, ckpt, "after-idle")
    finally:
        idle.close()
        slow.close()


# -- what a peer sends before it authenticates --------------------------------------------------------------
def test_wrong_token_is_refused_before_anything_is_parsed(start_server, ckpt):
    srv = start_server()
    r = send("127.0.0.1", srv.port, FileSource(ckpt), transfer_id="intruder", token="wrong", chunk_bytes=CHUNK)
    assert r.status == "failed" and "unauthenticated: bad token" in r.error and "Refused" in r.error
    assert r.reconnects == 0 and r.bytes_sent_total == 0
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    recv_exact(s, CHALLENGE.size)
    s.sendall(b"[" * 100_000)  # JSON instead of an answer: 32 bytes are read, never parsed
    assert _read_msg(s) == {"ok": False, "error": "unauthenticated: bad token", "transient": False}
    assert _closed(s)
    s.close()
    # a version-1 client sends its HELLO (with the token in clear) at once: that is no answer either
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    recv_exact(s, CHALLENGE.size)
    s.sendall(b"TBX1" + _raw_hello(json.dumps({"token": TOKEN, "transfer_id": "v1"}).encode())[4:])
    assert _read_msg(s)["error"] == "unauthenticated: bad token"
    s.close()
    assert srv.stats()["auth_failed"] == 3 and srv.results() == []
    assert _files(srv.storage_dir) == []
    _legit(srv, ckpt, "after-wrong-token")


def test_garbage_before_and_after_authentication(start_server, ckpt, store):
    srv = start_server()
    for garbage in (os.urandom(7), os.urandom(MAC_BYTES), os.urandom(10 << 20)):
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        recv_exact(s, CHALLENGE.size)
        try:
            s.sendall(garbage)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server read 32 bytes, refused and closed
        if len(garbage) < MAC_BYTES:
            s.shutdown(socket.SHUT_WR)  # a peer that gives up half-way
        assert _closed(s)
        s.close()
    s = _authenticated(srv.port)  # garbage instead of a HELLO
    s.sendall(os.urandom(4096))
    assert "hello: bad magic" in _read_msg(s)["error"]
    assert _closed(s)
    s.close()
    s = _authenticated(srv.port)  # a valid HELLO, then garbage instead of a chunk
    s.sendall(_hello("garbled", 3 * CHUNK + 123, store=3 * CHUNK + 123).encode())
    assert _read_msg(s) == {"ok": True, "resume_from": 0}
    try:
        s.sendall(os.urandom(1 << 20))
    except (BrokenPipeError, ConnectionResetError):
        pass  # the server refused the first bad chunk and closed while the rest was still being sent
    assert _closed(s)
    s.close()
    assert srv.stats()["auth_failed"] == 2 and srv.stats()["loop_errors"] == 0
    assert _files(store) == ["garbled.part", "garbled.part.sha256s"]  # empty: nothing verified
    assert (store / "garbled.part").stat().st_size == 0
    _legit(srv, ckpt, "garbled")  # the same id: taken over, verified
    assert _files(store) == ["garbled"]


# -- what an authenticated peer can make the server take ---------------------------------------------------
def test_oversized_and_nested_hellos_are_refused_unread(start_server, ckpt):
    srv = start_server()
    s = _authenticated(srv.port)
    s.sendall(MAGIC + LEN.pack(0xFFFFFFFF))  # announces 4 GiB of HELLO, sends none of it
    assert _read_msg(s)["error"] == f"hello: JSON of {0xFFFFFFFF} bytes exceeds {MAX_HELLO_BYTES}"
    assert _closed(s)
    s.close()
    s = _authenticated(srv.port)
    s.sendall(_raw_hello(b"[" * 2000 + b"]" * 2000))
    assert _read_msg(s)["error"] == "hello: nested JSON (a HELLO is one flat object)"
    s.close()
    s = _authenticated(srv.port)
    body = json.loads(_hello("x", 10).encode()[8:])
    s.sendall(_raw_hello(json.dumps({**body, "size_bytes": {"a": 1}}).encode()))
    assert "nested JSON" in _read_msg(s)["error"]
    s.close()
    s = _authenticated(srv.port)
    s.sendall(_raw_hello(b'{"x": "' + b"a" * MAX_HELLO_BYTES + b'"}'))  # flat, one string too long
    assert _read_msg(s)["error"] == f"hello: JSON of {MAX_HELLO_BYTES + 9} bytes exceeds {MAX_HELLO_BYTES}"
    s.close()
    s = _authenticated(srv.port)
    s.sendall(_raw_hello(b"\xff\xfe"))
    assert "hello: invalid JSON" in _read_msg(s)["error"]
    s.close()
    assert srv.errors() == [] and srv.results() == []
    _legit(srv, ckpt, "after-hellos")


def _vm_rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def test_a_huge_declared_size_allocates_nothing(start_server, store, ckpt):
    """A HELLO claiming 10**18 bytes: refused when it would be stored (more than the free disk) or when
    the server bounds objects or the controller announced less; when accepted (ballast, no limit), the
    server takes it chunk by chunk: no set, buffer or file sized by the declaration."""
    huge = 10**18
    srv = start_server()
    s = _authenticated(srv.port)
    s.sendall(_hello("huge", huge, chunk=256 << 20, store=huge).encode())
    assert _read_msg(s)["error"].startswith(f"hello.store_bytes: {huge} exceeds the free space of storage_dir")
    s.close()
    srv.announce("announced", 1000)
    s = _authenticated(srv.port)
    s.sendall(_hello("announced", huge).encode())
    assert _read_msg(s)["error"] == f"hello.size_bytes: {huge} exceeds the 1000 bytes announced for transfer announced"
    s.close()
    assert _files(store) == []
    bounded = start_server(max_object_bytes=1 << 30)
    s = _authenticated(bounded.port)
    s.sendall(_hello("huge", huge).encode())
    assert _read_msg(s)["error"] == f"hello.size_bytes: {huge} exceeds this server's limit of {1 << 30} bytes"
    s.close()
    # accepted: 3.7e9 chunks of 256 MiB declared; the server's memory grows by what arrives, not by that
    rss0 = _vm_rss_bytes()
    s = _authenticated(srv.port)
    s.sendall(_hello("huge", huge, chunk=256 << 20).encode())
    assert _read_msg(s) == {"ok": True, "resume_from": 0}
    s.sendall(CHUNK_HEADER.pack(MSG_CHUNK, 0, 256 << 20, b"\0" * 32) + b"\0" * (1 << 20))
    time.sleep(0.6)
    s.sendall(b"\0")  # the server is inside chunk 0 and sends a progress keepalive
    kind, received = SERVER_MSG.unpack(recv_exact(s, SERVER_MSG.size))
    assert kind == MSG_PROGRESS and received == (1 << 20) + 1
    assert _vm_rss_bytes() - rss0 < 64 << 20  # not 3 x 256 MiB of buffers, not a set of 3.7e9 indices
    s.close()
    assert _files(store) == []
    _legit(srv, ckpt, "after-huge")


def test_a_peer_cannot_make_the_server_take_more_than_declared(start_server, store, ckpt):
    srv = start_server()
    data = os.urandom(CHUNK)
    digest = hashlib.sha256(data).digest()
    s = _authenticated(srv.port)
    s.sendall(_hello("dup", 2 * CHUNK).encode())
    assert _read_msg(s) == {"ok": True, "resume_from": 0}
    s.sendall(CHUNK_HEADER.pack(MSG_CHUNK, 0, CHUNK, digest) + data)
    assert SERVER_MSG.unpack(recv_exact(s, SERVER_MSG.size)) == (MSG_ACK, 0)
    s.sendall(CHUNK_HEADER.pack(MSG_CHUNK, 0, CHUNK, digest) + data)  # again: refused, connection ends
    assert _closed(s)
    s.close()
    s = _authenticated(srv.port)  # a chunk that never verifies: NAKed a bounded number of times
    s.sendall(_hello("naks", 2 * CHUNK).encode())
    assert _read_msg(s) == {"ok": True, "resume_from": 0}
    for _ in range(MAX_NAKS_PER_CHUNK):
        s.sendall(CHUNK_HEADER.pack(MSG_CHUNK, 0, CHUNK, b"\1" * 32) + data)
        assert SERVER_MSG.unpack(recv_exact(s, SERVER_MSG.size)) == (MSG_NAK, 0)
    s.sendall(CHUNK_HEADER.pack(MSG_CHUNK, 0, CHUNK, b"\1" * 32) + data)
    assert _closed(s)
    s.close()
    s = _authenticated(srv.port)  # a chunk longer than declared: refused before its payload is read
    s.sendall(_hello("long", 2 * CHUNK).encode())
    assert _read_msg(s) == {"ok": True, "resume_from": 0}
    s.sendall(CHUNK_HEADER.pack(MSG_CHUNK, 1, CHUNK + 1, digest))
    assert _closed(s)
    s.close()
    assert srv.results() == [] and srv.errors() == []
    _legit(srv, ckpt, "after-more")


def test_announced_transfers_only(start_server, ckpt):
    srv = start_server(require_announced=True)
    r = send("127.0.0.1", srv.port, FileSource(ckpt), transfer_id="stranger", token=TOKEN, chunk_bytes=CHUNK)
    assert r.status == "failed" and "transfer stranger was not announced" in r.error
    srv.announce("small", ckpt.stat().st_size - 1)
    r = send("127.0.0.1", srv.port, FileSource(ckpt), transfer_id="small", token=TOKEN, chunk_bytes=CHUNK)
    assert r.status == "failed" and "bytes announced for transfer small" in r.error
    srv.announce("exact", ckpt.stat().st_size)
    _legit(srv, ckpt, "exact")
    assert _files(srv.storage_dir) == ["exact"]


def test_authenticated_connections_are_capped_and_busy_is_retried(start_server, ckpt):
    srv = start_server(max_connections=1)
    held = _authenticated(srv.port)
    r = send("127.0.0.1", srv.port, BallastSource(1000), transfer_id="busy", token=TOKEN, max_retries=2,
             backoff_s=0.01)
    assert r.status == "failed" and "server busy: 1 transfer connections already open" in r.error
    assert r.reconnects == 2
    threading.Timer(0.3, held.close).start()
    _legit(srv, ckpt, "after-busy", backoff_s=0.1)
    assert srv.stats()["refused_busy"] >= 3


# -- the accept loop ---------------------------------------------------------------------------------------
def test_accept_loop_survives_errors(start_server, ckpt):
    FlakyListener.failures = [OSError(errno.EMFILE, "Too many open files")] * 4 + [
        OSError(errno.ENFILE, "Too many open files in system"), OSError(errno.ECONNABORTED, "aborted"),
        RuntimeError("anything else"),
    ]
    srv = start_server(socket_factory=FlakyListener)
    _legit(srv, ckpt, "flaky", connect_timeout_s=20)
    st = srv.stats()
    assert st["out_of_fds"] == 5 and st["accept_errors"] == 1 and st["loop_errors"] == 1
    assert FlakyListener.failures == []


class _ServeProcess:
    """``python -m testbed.transfer serve`` on 127.0.0.1, optionally with a tiny open-file limit."""

    def __init__(self, store, log_path, nofile: int | None = None) -> None:
        import subprocess
        import sys

        def limit() -> None:
            if nofile is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        self.log_path = log_path
        with open(log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "testbed.transfer", "serve", "--host", "127.0.0.1", "--port", "0",
                 "--token", TOKEN, "--dir", str(store), "--no-fsync"],
                stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, text=True, preexec_fn=limit)
        self.port = json.loads(self.proc.stdout.readline())["port"]

    def open_fds(self) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def stop(self) -> None:
        import subprocess

        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()


def test_server_process_out_of_file_descriptors_keeps_accepting(tmp_path, store, ckpt):
    """A real server process whose open-file limit (soft and hard) is a few above what it needs: a
    flood makes accept() fail with EMFILE; it frees unauthenticated connections, logs it, and a
    transfer still completes and verifies."""
    raise_own_fd_limit(1000)
    probe = _ServeProcess(store, tmp_path / "probe.log")
    need = probe.open_fds()
    probe.stop()
    srv = _ServeProcess(store, tmp_path / "serve.log", nofile=need + 12)
    flood = Flood(("127.0.0.1", srv.port), 300, challenge=CHALLENGE)
    try:
        assert srv.open_fds() <= need + 12
        r = send("127.0.0.1", srv.port, BallastSource(5 << 20, seed=3), transfer_id="starved", token=TOKEN,
                 chunk_bytes=CHUNK, connect_timeout_s=20)
        assert r.status == "completed", r.error
        assert srv.proc.poll() is None
    finally:
        flood.close()
    r = send("127.0.0.1", srv.port, FileSource(ckpt), transfer_id="stored", token=TOKEN, chunk_bytes=CHUNK)
    assert r.status == "completed", r.error
    assert (store / "stored").read_bytes() == ckpt.read_bytes()
    srv.stop()
    log = srv.log_path.read_text()
    assert "accept: EMFILE" in log and "Traceback" not in log
