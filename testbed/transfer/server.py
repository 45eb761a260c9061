"""The receiving side: ``TransferServer``, authenticated first, then one thread per connection.

It listens on every site's WAN address, where hostile peers can reach it, so it has the agent's
defences, through the same :class:`testbed.netguard.Gate`: a connection must answer an HMAC
challenge with the per-run token before the server reads anything else from it (32 bytes, never
parsed); until then it costs one file descriptor and no thread; at most ``max_pending`` such
connections exist (fair per-address eviction), each for at most ``auth_timeout_s``; a wrong
answer is refused; the accept loop survives EMFILE/ENFILE and any other error. Nothing is
allocated, created on disk or parsed for a peer that has not authenticated.

An authenticated connection (at most ``max_connections``; more are refused as busy, which the
client retries) gets a thread: it reads a HELLO (at most ``MAX_HELLO_BYTES`` of flat JSON), checks
it against this server's limits -- storage, ``max_object_bytes``, what the controller announced
for that transfer id (:meth:`~TransferServer.announce`), the free space of ``storage_dir`` -- and
refuses it before any state or file exists, answers with the resume point, then verifies every
chunk's SHA-256 on arrival (ACK or NAK), feeds verified chunks in order to the sink and the
whole-object hash, and ends with FINAL. A connection receives at most what its HELLO declared,
plus ``MAX_NAKS_PER_CHUNK`` resends of a chunk; a chunk sent again after it was verified ends it.
Partial state survives disconnects (see :mod:`testbed.transfer.state`).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import select
import socket
import threading
import time
from pathlib import Path
from typing import Callable

from testbed.netguard.gate import LISTEN_BACKLOG, MAX_PENDING, Gate
from testbed.transfer.commit import Committer
from testbed.transfer.errors import ProtocolError, TransferError, TransientError
from testbed.transfer.protocol import (
    AUTH_OK, CHALLENGE, CHUNK_HEADER, MSG_ACK, MSG_CHUNK, MSG_NAK, MSG_PROGRESS, SERVER_MSG, TRANSFER_ID_RE, Hello,
    encode_final, encode_json_msg, encode_refusal, read_hello, recv_into_exact,
)
from testbed.transfer.report import TransferResult
from testbed.transfer.sink import PART_SUFFIX
from testbed.transfer.state import TransferState, TransferStates

log = logging.getLogger(__name__)

SocketFactory = Callable[[int, int], socket.socket]
PROGRESS_INTERVAL_S = 0.5
DEFAULT_MAX_HELD_BYTES = 512 * 1024 * 1024
MAX_CONNECTIONS = 32  # authenticated connections at once (only token holders get that far)
AUTH_TIMEOUT_S = 10.0  # a WAN round trip under emulation can be slow; still bounds an idle peer
MAX_NAKS_PER_CHUNK = 8  # the client gives up after max_chunk_resends (default 3)


class _Connection:
    def __init__(self, sock: socket.socket, peer: object) -> None:
        self.sock = sock
        self.peer = peer

    def abort(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class TransferServer:
    """``with TransferServer("127.0.0.1", token=t, storage_dir=d) as srv: ... srv.port ...``

    ``socket_factory(family, type)`` creates the listening socket (e.g. inside a network namespace;
    accepted sockets inherit it). ``on_complete(result)`` is called from a connection thread for
    every transfer that reached FINAL. ``io_timeout_s`` drops an authenticated connection that
    sends nothing for that long (its partial state is kept); ``auth_timeout_s`` one that has not
    answered the challenge. Partial ``.part`` files are kept on ``stop()`` so that a new server on
    the same ``storage_dir`` can resume them; final files appear only when verified.

    Limits on what one (authenticated) peer can make the server take: ``max_object_bytes`` (None:
    no limit) on any HELLO's ``size_bytes``; :meth:`announce` bounds one transfer id (and with
    ``require_announced`` only announced ids are accepted); a stored object must fit the free space
    of ``storage_dir``.

    ``keep_open_s`` > 0: after a transfer, a connection stays open that long for the next HELLO of the
    same client (a :class:`testbed.transfer.client.Channel`), which then needs no new connection and
    no new challenge; 0 (the default): the server closes it after FINAL.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, token: str,
                 storage_dir: str | os.PathLike | None = None, socket_factory: SocketFactory | None = None,
                 on_complete: Callable[[TransferResult], None] | None = None, io_timeout_s: float = 60.0,
                 fsync: bool = True, max_held_bytes: int = DEFAULT_MAX_HELD_BYTES, backlog: int = LISTEN_BACKLOG,
                 max_pending: int = MAX_PENDING, auth_timeout_s: float = AUTH_TIMEOUT_S,
                 max_connections: int = MAX_CONNECTIONS, max_object_bytes: int | None = None,
                 require_announced: bool = False, keep_open_s: float = 0.0) -> None:
        if not token:
            raise ValueError("token must be a non-empty string")
        if max_pending < 1 or max_connections < 1 or auth_timeout_s <= 0:
            raise ValueError("max_pending and max_connections must be >= 1 and auth_timeout_s > 0")
        if max_object_bytes is not None and max_object_bytes < 0:
            raise ValueError(f"max_object_bytes must be >= 0, got {max_object_bytes}")
        if not keep_open_s >= 0:
            raise ValueError(f"keep_open_s must be >= 0, got {keep_open_s}")
        self.keep_open_s = float(keep_open_s)
        self.host = host
        self._port = port
        self._token = token.encode()
        self.storage_dir = None if storage_dir is None else Path(storage_dir)
        if self.storage_dir is not None and not self.storage_dir.is_dir():
            raise ValueError(f"storage_dir {self.storage_dir} is not a directory")
        self._factory = socket_factory or socket.socket
        self._on_complete = on_complete
        self.io_timeout_s = io_timeout_s
        self.max_held_bytes = max_held_bytes
        self._backlog = backlog
        self._max_pending = max_pending
        self._auth_timeout_s = auth_timeout_s
        self._max_connections = max_connections
        self.max_object_bytes = max_object_bytes
        self.require_announced = require_announced
        self._announced: dict[str, int] = {}
        self._refused_busy = 0
        self._states = TransferStates(self.storage_dir, fsync=fsync)
        self._gate: Gate | None = None
        self._accept_thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._conns: dict[_Connection, threading.Thread] = {}
        self._lock = threading.Lock()
        self._errors: list[BaseException] = []

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> "TransferServer":
        if self._gate is not None:
            raise RuntimeError("TransferServer already started")
        family, _, _, _, addr = socket.getaddrinfo(self.host, self._port, type=socket.SOCK_STREAM)[0]
        sock = self._factory(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(addr)
            sock.listen(self._backlog)
            self._port = sock.getsockname()[1]
            self._gate = Gate(sock, CHALLENGE, self._token, self._admit, encode_refusal,
                              name=f"transfer server {self.host}:{self._port}", max_pending=self._max_pending,
                              auth_timeout_s=self._auth_timeout_s, log=log)
        except BaseException:
            sock.close()
            raise
        self._accept_thread = threading.Thread(target=self._gate.serve_forever, name=f"tb-xfer-accept-{self._port}")
        self._accept_thread.start()
        return self

    @property
    def port(self) -> int:
        return self._port

    def stop(self) -> None:
        """Close the listener and every connection, join all threads (idempotent)."""
        self._stopping.set()
        if self._gate is not None:
            self._gate.stop()
        if self._accept_thread is not None:
            self._accept_thread.join()
            self._accept_thread = None
        self._states.abort_all_and_close()
        with self._lock:
            conns = dict(self._conns)
        for c in conns:
            c.abort()
        for t in conns.values():
            t.join()

    def __enter__(self) -> "TransferServer":
        return self.start()

    def __exit__(self, exc_type, exc, tb) -> None:
        self.stop()
        if exc_type is None and self._errors:
            raise TransferError(f"transfer server handler failed: {self._errors[0]!r}") from self._errors[0]

    def results(self) -> list[TransferResult]:
        """Every transfer that reached FINAL (verified or not), in order."""
        return self._states.results()

    def errors(self) -> list[BaseException]:
        """Unexpected exceptions in connection threads (bugs, a failing callback); not link errors."""
        with self._lock:
            return list(self._errors)

    def stats(self) -> dict[str, int]:
        """The gate's counters (``accepted``, ``evicted``, ``timed_out``, ``auth_failed``, ``pending``, ...),
        ``refused_busy``, and ``connections``: authenticated connections open now."""
        with self._lock:
            n = len(self._conns)
        gate = self._gate.stats() if self._gate is not None else {}
        return {**gate, "refused_busy": self._refused_busy, "connections": n}

    def announce(self, transfer_id: str, size_bytes: int) -> None:
        """The controller's word that ``transfer_id`` is coming and is at most ``size_bytes``: a HELLO for
        it declaring more is refused (and so is every byte past what it declared)."""
        if not TRANSFER_ID_RE.match(transfer_id):
            raise ValueError(f"transfer_id must match {TRANSFER_ID_RE.pattern}, got {transfer_id!r}")
        if size_bytes < 0:
            raise ValueError(f"size_bytes must be >= 0, got {size_bytes}")
        with self._lock:
            self._announced[transfer_id] = size_bytes

    # -- threads ---------------------------------------------------------------------------------
    def _admit(self, sock: socket.socket, source: str) -> None:
        """An authenticated connection, on the gate's thread: a thread of its own, or busy (retried)."""
        conn = _Connection(sock, source)
        t = threading.Thread(target=self._serve, args=(conn,), name=f"tb-xfer-conn-{source}")
        with self._lock:
            busy = len(self._conns) >= self._max_connections or self._stopping.is_set()
            if not busy:
                self._conns[conn] = t
        if busy:
            self._refused_busy += 1
            self._refuse_busy(sock, f"server busy: {self._max_connections} transfer connections already open")
            return
        try:
            t.start()
        except RuntimeError:  # no thread to be had
            with self._lock:
                self._conns.pop(conn, None)
            self._refuse_busy(sock, "server busy: cannot start a connection thread")

    def _refuse_busy(self, sock: socket.socket, message: str) -> None:
        try:
            sock.setblocking(False)
            sock.send(encode_refusal(message, transient=True))  # small: never blocks
        except OSError:
            pass
        sock.close()

    def _serve(self, conn: _Connection) -> None:
        sock = conn.sock
        try:
            sock.settimeout(self.io_timeout_s)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.sendall(AUTH_OK)
            hello = self._handshake(sock)
            while hello is not None:
                self._serve_transfer(conn, hello)
                hello = self._next_hello(sock)
        except (OSError, TransientError, ProtocolError):
            pass  # a cut link, a stale or garbled connection: partial state is kept for a resume
        except Exception as e:  # noqa: BLE001 -- recorded and re-raised by __exit__
            self._record_error(e)
        finally:
            sock.close()
            with self._lock:
                self._conns.pop(conn, None)

    def _next_hello(self, sock: socket.socket) -> Hello | None:
        """The next HELLO on a kept connection (``keep_open_s``), or None: the client closed it, said
        nothing for ``keep_open_s``, or the server is stopping."""
        if self.keep_open_s <= 0 or self._stopping.is_set():
            return None
        readable, _, _ = select.select([sock], [], [], self.keep_open_s)
        if not readable or self._stopping.is_set() or not sock.recv(1, socket.MSG_PEEK):
            return None
        sock.settimeout(self.io_timeout_s)
        return self._handshake(sock)

    def _handshake(self, sock: socket.socket) -> Hello | None:
        try:
            hello = read_hello(sock)
        except ProtocolError as e:
            sock.sendall(encode_json_msg({"ok": False, "error": str(e)}))
            return None
        error = self._refusal_of(hello)
        if error is not None:
            sock.sendall(encode_json_msg({"ok": False, "error": error}))
            return None
        return hello

    def _refusal_of(self, hello: Hello) -> str | None:
        """Why this server will not take ``hello`` (None: it will); decided before any state or file exists."""
        tid, size = hello.transfer_id, hello.size_bytes
        if hello.store_bytes > 0 and self.storage_dir is None:
            return "server has no storage_dir; cannot store a file (send with store_bytes=0)"
        if self.max_object_bytes is not None and size > self.max_object_bytes:
            return f"hello.size_bytes: {size} exceeds this server's limit of {self.max_object_bytes} bytes"
        with self._lock:
            announced = self._announced.get(tid)
        if announced is None and self.require_announced:
            return f"hello.transfer_id: transfer {tid} was not announced to this server"
        if announced is not None and size > announced:
            return f"hello.size_bytes: {size} exceeds the {announced} bytes announced for transfer {tid}"
        if hello.store_bytes > 0:
            try:
                have = (self.storage_dir / (tid + PART_SUFFIX)).stat().st_size  # a partial one is resumed in place
            except OSError:
                have = 0
            free = shutil.disk_usage(self.storage_dir).free + have
            if hello.store_bytes > free:
                return f"hello.store_bytes: {hello.store_bytes} exceeds the free space of storage_dir ({free} bytes)"
        return None

    def _serve_transfer(self, conn: _Connection, hello: Hello) -> None:
        state = self._states.acquire(hello, conn, conn.abort)
        if isinstance(state, TransferResult):  # done before; the client missed FINAL or sends it again
            conn.sock.sendall(encode_json_msg({"ok": True, "resume_from": hello.n_chunks}))
            conn.sock.sendall(encode_final(_final_msg(state)))
            return
        try:
            conn.sock.sendall(encode_json_msg({"ok": True, "resume_from": state.prefix}))
            if not state.complete:
                self._receive(conn.sock, state)
            self._finish(conn.sock, state)
        finally:
            self._states.release(state, conn)

    def _receive(self, sock: socket.socket, state: TransferState) -> None:
        """Chunks until every one from the resume point is verified. Everything read is bounded by the
        HELLO: each index once (a verified chunk sent again is a protocol error), each length exact,
        a chunk NAKed at most ``MAX_NAKS_PER_CHUNK`` times."""
        hello = state.hello
        header = memoryview(bytearray(CHUNK_HEADER.size))
        progress = _Progress(sock)
        start = state.prefix
        verified = _Verified(start, hello.n_chunks, max(1, self.max_held_bytes // hello.chunk_bytes))
        naks: dict[int, int] = {}
        buffer_bytes = max(1, min(hello.chunk_bytes, hello.size_bytes))  # a small object gets small buffers
        with Committer(state, buffer_bytes, self.max_held_bytes) as committer:
            while not verified.done:
                recv_into_exact(sock, header)
                kind, index, length, digest = CHUNK_HEADER.unpack(header)
                if kind != MSG_CHUNK or not start <= index < hello.n_chunks or length != hello.chunk_len(index):
                    raise ProtocolError(f"bad chunk header kind={kind!r} index={index} length={length}")
                if verified.has(index):
                    raise ProtocolError(f"chunk {index} sent again after it was verified")
                buf = committer.buffer()
                try:
                    progress.recv_into(buf[:length])
                except BaseException:
                    committer.release(buf)
                    raise
                if hashlib.sha256(buf[:length]).digest() == digest:
                    verified.add(index)
                    committer.submit(index, buf, length, digest)
                    sock.sendall(SERVER_MSG.pack(MSG_ACK, index))
                else:
                    committer.release(buf)
                    naks[index] = naks.get(index, 0) + 1
                    if naks[index] > MAX_NAKS_PER_CHUNK:
                        raise ProtocolError(f"chunk {index} failed verification {naks[index]} times")
                    sock.sendall(SERVER_MSG.pack(MSG_NAK, index))
        committer.raise_if_failed()

    def _finish(self, sock: socket.socket, state: TransferState) -> None:
        hello = state.hello
        t0 = time.monotonic()
        sha = state.whole.hexdigest()
        if sha == hello.sha256:
            path, error = state.sink.finalize(), None
        else:
            state.sink.discard()
            path, error = None, f"whole-object SHA-256 mismatch: received {sha}, declared {hello.sha256}"
        result = TransferResult(hello.transfer_id, error is None, hello.size_bytes, hello.store_bytes, sha,
                                path, time.monotonic() - t0, error)
        self._states.finish(state, result)
        try:
            sock.sendall(encode_final(_final_msg(result)))
        except OSError:
            pass  # the client will reconnect and be told the transfer is complete
        finally:
            if self._on_complete is not None:
                self._on_complete(result)

    def _record_error(self, e: BaseException) -> None:
        with self._lock:
            self._errors.append(e)


class _Verified:
    """Which chunks in ``[start, end)`` one connection has verified: a low-water mark plus the few
    verified ahead of a gap (at most ``max_ahead``), never a set sized by the declared object."""

    def __init__(self, start: int, end: int, max_ahead: int) -> None:
        self.low, self.end, self.max_ahead = start, end, max_ahead
        self.ahead: set[int] = set()

    @property
    def done(self) -> bool:
        return self.low >= self.end

    def has(self, index: int) -> bool:
        return index < self.low or index in self.ahead

    def add(self, index: int) -> None:
        if index != self.low:
            if len(self.ahead) >= self.max_ahead:
                raise ProtocolError(f"more than {self.max_ahead} chunks verified ahead of chunk {self.low}")
            self.ahead.add(index)
            return
        self.low += 1
        while self.low in self.ahead:
            self.ahead.discard(self.low)
            self.low += 1


class _Progress:
    """Receives payloads and sends a PROGRESS keepalive at most every PROGRESS_INTERVAL_S."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.received = 0
        self.last = time.monotonic()

    def recv_into(self, view: memoryview) -> None:
        got = 0
        while got < len(view):
            k = self.sock.recv_into(view[got:])
            if k == 0:
                raise ConnectionError(f"client closed the connection {got} bytes into a chunk")
            got += k
            self.received += k
            now = time.monotonic()
            if now - self.last >= PROGRESS_INTERVAL_S:
                self.sock.sendall(SERVER_MSG.pack(MSG_PROGRESS, self.received))
                self.last = now


def _final_msg(result: TransferResult) -> dict:
    return {"ok": result.ok, "sha256": result.sha256, "path": None if result.path is None else str(result.path),
            "verify_s": result.verify_s, "error": result.error}
