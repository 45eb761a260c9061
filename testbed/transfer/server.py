"""The receiving side: ``TransferServer``, one thread per connection.

Each connection reads a HELLO, checks the token (a bad one is refused before any state or file
exists), answers with the resume point, then verifies every chunk's SHA-256 on arrival (ACK or
NAK), feeds verified chunks in order to the sink and the whole-object hash, and ends with FINAL.
Partial state survives disconnects (see :mod:`testbed.transfer.state`).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import socket
import threading
import time
from pathlib import Path
from typing import Callable

from testbed.transfer.commit import Committer
from testbed.transfer.errors import ProtocolError, TransferError, TransientError
from testbed.transfer.protocol import (
    CHUNK_HEADER, MSG_ACK, MSG_CHUNK, MSG_NAK, MSG_PROGRESS, SERVER_MSG, Hello, encode_final, encode_json_msg,
    read_hello, recv_into_exact,
)
from testbed.transfer.report import TransferResult
from testbed.transfer.state import Registry, TransferState

SocketFactory = Callable[[int, int], socket.socket]
PROGRESS_INTERVAL_S = 0.5
ACCEPT_POLL_S = 0.2
DEFAULT_MAX_HELD_BYTES = 512 * 1024 * 1024


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
    every transfer that reached FINAL. ``io_timeout_s`` drops a connection that sends nothing for
    that long (its partial state is kept). Partial ``.part`` files are kept on ``stop()`` so that a
    new server on the same ``storage_dir`` can resume them; final files appear only when verified.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, token: str,
                 storage_dir: str | os.PathLike | None = None, socket_factory: SocketFactory | None = None,
                 on_complete: Callable[[TransferResult], None] | None = None, io_timeout_s: float = 60.0,
                 fsync: bool = True, max_held_bytes: int = DEFAULT_MAX_HELD_BYTES, backlog: int = 16) -> None:
        if not token:
            raise ValueError("token must be a non-empty string")
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
        self._registry = Registry(self.storage_dir, fsync=fsync)
        self._listener: socket.socket | None = None
        self._accept_thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._conns: dict[_Connection, threading.Thread] = {}
        self._lock = threading.Lock()
        self._errors: list[BaseException] = []

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> "TransferServer":
        if self._listener is not None:
            raise RuntimeError("TransferServer already started")
        family, _, _, _, addr = socket.getaddrinfo(self.host, self._port, type=socket.SOCK_STREAM)[0]
        sock = self._factory(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(addr)
            sock.listen(self._backlog)
            sock.settimeout(ACCEPT_POLL_S)
        except BaseException:
            sock.close()
            raise
        self._listener = sock
        self._port = sock.getsockname()[1]
        self._accept_thread = threading.Thread(target=self._accept_loop, name=f"tb-xfer-accept-{self._port}")
        self._accept_thread.start()
        return self

    @property
    def port(self) -> int:
        return self._port

    def stop(self) -> None:
        """Close the listener and every connection, join all threads (idempotent)."""
        self._stopping.set()
        if self._accept_thread is not None:
            self._accept_thread.join()
            self._accept_thread = None
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        self._registry.abort_all_and_close()
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
        return self._registry.results()

    def errors(self) -> list[BaseException]:
        """Unexpected exceptions in connection threads (bugs, a failing callback); not link errors."""
        with self._lock:
            return list(self._errors)

    # -- threads ---------------------------------------------------------------------------------
    def _accept_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                sock, peer = self._listener.accept()
            except TimeoutError:
                continue
            except OSError as e:
                if not self._stopping.is_set():
                    self._record_error(e)
                return
            conn = _Connection(sock, peer)
            t = threading.Thread(target=self._serve, args=(conn,), name=f"tb-xfer-conn-{peer}")
            with self._lock:
                self._conns[conn] = t
            t.start()

    def _serve(self, conn: _Connection) -> None:
        sock = conn.sock
        try:
            sock.settimeout(self.io_timeout_s)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            hello = self._handshake(sock)
            if hello is not None:
                self._serve_transfer(conn, hello)
        except (OSError, TransientError, ProtocolError):
            pass  # a cut link, a stale or garbled connection: partial state is kept for a resume
        except Exception as e:  # noqa: BLE001 -- recorded and re-raised by __exit__
            self._record_error(e)
        finally:
            sock.close()
            with self._lock:
                self._conns.pop(conn, None)

    def _handshake(self, sock: socket.socket) -> Hello | None:
        try:
            hello = read_hello(sock)
        except ProtocolError as e:
            sock.sendall(encode_json_msg({"ok": False, "error": str(e)}))
            return None
        error = None
        if not hmac.compare_digest(hello.token.encode(), self._token):
            error = "bad token"
        elif hello.store_bytes > 0 and self.storage_dir is None:
            error = "server has no storage_dir; cannot store a file (send with store_bytes=0)"
        if error is not None:
            sock.sendall(encode_json_msg({"ok": False, "error": error}))
            return None
        return hello

    def _serve_transfer(self, conn: _Connection, hello: Hello) -> None:
        state = self._registry.acquire(hello, conn, conn.abort)
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
            self._registry.release(state, conn)

    def _receive(self, sock: socket.socket, state: TransferState) -> None:
        hello = state.hello
        header = memoryview(bytearray(CHUNK_HEADER.size))
        progress = _Progress(sock)
        start, missing = state.prefix, set(range(state.prefix, hello.n_chunks))
        with Committer(state, hello.chunk_bytes, self.max_held_bytes) as committer:
            while missing:
                recv_into_exact(sock, header)
                kind, index, length, digest = CHUNK_HEADER.unpack(header)
                if kind != MSG_CHUNK or not start <= index < hello.n_chunks or length != hello.chunk_len(index):
                    raise ProtocolError(f"bad chunk header kind={kind!r} index={index} length={length}")
                buf = committer.buffer()
                try:
                    progress.recv_into(buf[:length])
                except BaseException:
                    committer.release(buf)
                    raise
                if hashlib.sha256(buf[:length]).digest() == digest:
                    if index in missing:
                        missing.discard(index)
                        committer.submit(index, buf, length, digest)
                    else:
                        committer.release(buf)
                    sock.sendall(SERVER_MSG.pack(MSG_ACK, index))
                else:
                    committer.release(buf)
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
        self._registry.finish(state, result)
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
