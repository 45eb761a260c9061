"""The sending side: :func:`send` moves one source to a server and returns a :class:`TransferReport`.

Connection errors and stalls (a link outage) lead to a reconnect with exponential backoff and a
resume from the server's resume point, until success, ``deadline_s`` or ``max_retries`` attempts
in a row without progress (an attempt that advanced the resume point resets the count). A bad
token, an invalid HELLO, a chunk that keeps failing verification or a whole-object mismatch ends
the call at once with ``status="failed"``; a set ``cancel`` event ends it with ``"cancelled"``. The
server keeps its partial state in every case, so a later ``send`` with the same ``transfer_id``
resumes.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass
from typing import Callable

from testbed.transfer.errors import (
    Cancelled, DeadlineExceeded, ProtocolError, RefusedError, TransferError, TransientError,
)
from testbed.transfer.protocol import (
    CHALLENGE, MAX_CHUNK_BYTES, MIN_CHUNK_BYTES, TRANSFER_ID_RE, Hello, recv_exact, recv_json,
)
from testbed.transfer.report import TransferReport
from testbed.transfer.session import Session, Tally
from testbed.transfer.source import Source

DEFAULT_CHUNK_BYTES = 4 * 1024 * 1024
DEFAULT_WINDOW_BYTES = 128 * 1024 * 1024
SocketFactory = Callable[[int, int], socket.socket]


class _Stopper:
    """Raises ``Cancelled`` / ``DeadlineExceeded`` when asked, and sleeps interruptibly."""

    def __init__(self, cancel: threading.Event | None, deadline_at: float | None) -> None:
        self.cancel = cancel
        self.deadline_at = deadline_at

    def check(self) -> None:
        if self.cancel is not None and self.cancel.is_set():
            raise Cancelled("cancelled by the caller")
        if self.deadline_at is not None and time.monotonic() >= self.deadline_at:
            raise DeadlineExceeded("deadline exceeded")

    def bound(self, timeout_s: float) -> float:
        """``timeout_s`` clipped to the time left before the deadline (at least 1 ms)."""
        if self.deadline_at is None:
            return timeout_s
        return max(0.001, min(timeout_s, self.deadline_at - time.monotonic()))

    def sleep(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            self.check()
            if self.cancel is not None:
                self.cancel.wait(min(left, 0.05))
            else:
                time.sleep(min(left, 0.05))
        self.check()


class Channel:
    """A client's authenticated connection to one transfer server, kept between :func:`send` calls
    (``send(..., channel=ch)``) so that a transfer after the first needs no TCP connect and no
    challenge: only its HELLO. The server must keep connections open (``keep_open_s``); where it
    has closed this one, the next send connects anew. Not thread-safe: one send at a time.
    ``with Channel() as ch:`` closes it."""

    def __init__(self) -> None:
        self.sock: socket.socket | None = None
        self.reused = 0  # sends that went over the kept connection

    def take(self) -> socket.socket | None:
        sock, self.sock = self.sock, None
        return sock

    def close(self) -> None:
        sock = self.take()
        if sock is not None:
            sock.close()

    def __enter__(self) -> "Channel":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@dataclass(frozen=True)
class _Options:
    connect_timeout_s: float
    io_timeout_s: float
    max_retries: int
    backoff_s: float
    backoff_max_s: float
    window_bytes: int
    max_chunk_resends: int
    factory: SocketFactory
    on_progress: Callable[[int, int], None] | None
    channel: Channel | None = None


def send(host: str, port: int, source: Source, *, transfer_id: str, token: str,
         chunk_bytes: int = DEFAULT_CHUNK_BYTES, store_bytes: int | None = None, connect_timeout_s: float = 5.0,
         io_timeout_s: float = 10.0, deadline_s: float | None = None, max_retries: int = 10,
         backoff_s: float = 0.25, backoff_max_s: float = 5.0, window_bytes: int = DEFAULT_WINDOW_BYTES,
         max_chunk_resends: int = 3, socket_factory: SocketFactory | None = None,
         on_progress: Callable[[int, int], None] | None = None, cancel: threading.Event | None = None,
         corrupt_chunks: set[int] | frozenset[int] = frozenset(), channel: Channel | None = None) -> TransferReport:
    """Send ``source`` as ``transfer_id``; never raises for link or verification problems (see the report).

    ``store_bytes`` (default ``source.store_bytes``) is how many leading bytes the server keeps on
    disk. ``deadline_s`` is counted from this call. ``io_timeout_s``: a connection on which nothing
    was sent or received for that long counts as broken. ``max_retries``: reconnection attempts in a
    row without progress. ``on_progress(bytes_verified, size_bytes)`` is called from this thread.
    ``corrupt_chunks`` is a test hook: those chunks get one flipped byte on their first send (the
    server must NAK them). ``channel``: a :class:`Channel` whose kept connection this send uses (and
    leaves open for the next) where the server keeps connections. Raises ``ValueError`` only for
    invalid arguments.
    """
    if not TRANSFER_ID_RE.match(transfer_id):
        raise ValueError(f"transfer_id must match {TRANSFER_ID_RE.pattern}, got {transfer_id!r}")
    if not MIN_CHUNK_BYTES <= chunk_bytes <= MAX_CHUNK_BYTES:
        raise ValueError(f"chunk_bytes must be in [{MIN_CHUNK_BYTES}, {MAX_CHUNK_BYTES}], got {chunk_bytes}")
    store_bytes = source.store_bytes if store_bytes is None else store_bytes
    if not 0 <= store_bytes <= source.size_bytes:
        raise ValueError(f"store_bytes must be in [0, {source.size_bytes}], got {store_bytes}")
    t0 = time.monotonic()
    report = TransferReport(transfer_id, size_bytes=source.size_bytes, chunk_bytes=chunk_bytes,
                            chunks=source.n_chunks(chunk_bytes), started_at_monotonic=t0)
    stopper = _Stopper(cancel, None if deadline_s is None else t0 + deadline_s)
    tally = Tally(corrupt_once=set(corrupt_chunks))
    opts = _Options(connect_timeout_s, io_timeout_s, max_retries, backoff_s, backoff_max_s, window_bytes,
                    max_chunk_resends, socket_factory or socket.socket, on_progress, channel)
    try:
        stopper.check()
        t = time.monotonic()
        manifest = source.manifest(chunk_bytes)
        report.phases.append(("manifest", t, time.monotonic()))
        report.sha256 = manifest.sha256
        hello = Hello(transfer_id, manifest.size_bytes, chunk_bytes, manifest.n_chunks, manifest.sha256,
                      manifest.chunks_sha256, store_bytes)
        _retry_loop(host, port, source, manifest, token, hello, report, tally, stopper, opts)
        report.status = "completed"
    except Cancelled as e:
        report.status, report.error = "cancelled", str(e)
    except TransferError as e:
        report.status, report.error = "failed", f"{type(e).__name__}: {e}"
    finally:
        _finish_report(report, tally, t0)
    return report


def _retry_loop(host, port, source, manifest, token, hello, report, tally, stopper, opts: _Options) -> None:
    failures, best_resume, delay = 0, 0, opts.backoff_s
    while True:
        try:
            _one_connection(host, port, source, manifest, token, hello, report, tally, stopper, opts)
            return
        except (OSError, TransientError) as e:
            if report.resume_points and report.resume_points[-1] > best_resume:  # that connection made progress
                best_resume, failures, delay = report.resume_points[-1], 0, opts.backoff_s
            failures += 1
            if failures > opts.max_retries:
                raise TransientError(f"gave up after {opts.max_retries} retries without progress; "
                                     f"last error: {e}") from e
            report.reconnects += 1
            t_b = time.monotonic()
            try:
                stopper.sleep(delay)
            finally:
                report.phases.append(("backoff", t_b, time.monotonic()))
            delay = min(delay * 2, opts.backoff_max_s)


def _one_connection(host, port, source, manifest, token, hello, report, tally, stopper, opts: _Options) -> None:
    """Connect, authenticate, HELLO, stream until FINAL OK; record phases. Raises on anything else."""
    sock, keep = None, False
    try:
        t_c = time.monotonic()
        try:
            sock = opts.channel.take() if opts.channel is not None else None
            if sock is not None:  # a kept connection: HELLO only; closed meanwhile: connect anew
                try:
                    resume_from = _send_hello(sock, hello, stopper.bound(opts.io_timeout_s))
                    opts.channel.reused += 1
                except OSError:
                    sock.close()
                    sock = None
            if sock is None:
                sock = _connect(host, port, opts.factory, stopper.bound(opts.connect_timeout_s))
                resume_from = _handshake(sock, token, hello, stopper.bound(opts.io_timeout_s))
        finally:
            report.phases.append(("connect", t_c, time.monotonic()))
        if report.sessions == 0:
            report.resumed_bytes = min(resume_from * hello.chunk_bytes, hello.size_bytes)
        report.sessions += 1
        report.resume_points.append(resume_from)
        session = Session(sock, source, manifest, resume_from, tally, window_bytes=opts.window_bytes,
                          io_timeout_s=opts.io_timeout_s, max_chunk_resends=opts.max_chunk_resends,
                          check_stop=stopper.check, on_progress=opts.on_progress)
        t_s = time.monotonic()
        try:
            final = session.run()
        finally:
            if session.t_first_byte is not None:
                end = session.t_last_ack if session.t_final is not None else time.monotonic()
                report.phases.append(("transfer", session.t_first_byte, end))
        report.phases.append(("verify", session.t_last_ack or t_s, session.t_final))
        report.server_path = final.get("path")
        if opts.channel is not None:
            opts.channel.sock, keep = sock, True
    finally:
        if sock is not None and not keep:
            sock.close()


def _connect(host: str, port: int, factory: SocketFactory, timeout_s: float) -> socket.socket:
    family, _, _, _, addr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    sock = factory(family, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout_s)
        sock.connect(addr)
    except BaseException:
        sock.close()
        raise
    return sock


def _handshake(sock: socket.socket, token: str, hello: Hello, timeout_s: float) -> int:
    """Answer the server's challenge, then HELLO; the resume point. A closed connection (e.g. one the
    server dropped under a flood) is an ``OSError``: the caller reconnects."""
    sock.settimeout(timeout_s)
    nonce = CHALLENGE.nonce_of(recv_exact(sock, CHALLENGE.size))
    if nonce is None:
        raise ProtocolError("the peer is not a testbed transfer server of this version (protocol mismatch)")
    sock.sendall(CHALLENGE.mac(token, nonce))
    _check_answer(recv_json(sock, "auth"), hello)
    return _send_hello(sock, hello, timeout_s)


def _send_hello(sock: socket.socket, hello: Hello, timeout_s: float) -> int:
    """HELLO on an authenticated connection; the resume point."""
    sock.settimeout(timeout_s)
    sock.sendall(hello.encode())
    reply = _check_answer(recv_json(sock, "reply"), hello)
    resume_from = reply.get("resume_from")
    if not isinstance(resume_from, int) or not 0 <= resume_from <= hello.n_chunks:
        raise ProtocolError(f"reply.resume_from: invalid {resume_from!r}")
    return resume_from


def _check_answer(reply: object, hello: Hello) -> dict:
    if not isinstance(reply, dict):
        raise ProtocolError("reply: not a JSON object")
    if not reply.get("ok"):
        why = f"server refused transfer {hello.transfer_id}: {reply.get('error')}"
        raise TransientError(why) if reply.get("transient") is True else RefusedError(why)
    return reply


def _finish_report(report: TransferReport, tally: Tally, t0: float) -> None:
    end = time.monotonic()
    report.bytes_sent_total = tally.bytes_sent_total
    report.chunk_resends = tally.chunk_resends
    report.t_total_s = end - t0
    report.t_manifest_s = sum(b - a for name, a, b in report.phases if name == "manifest")
    report.t_connect_s = sum(b - a for name, a, b in report.phases if name == "connect")
    if tally.t_first_byte is not None:
        report.t_transfer_s = (tally.t_last_ack or end) - tally.t_first_byte
    if report.status == "completed":
        report.t_verify_s = sum(b - a for name, a, b in report.phases if name == "verify")
        moved = report.size_bytes - report.resumed_bytes
        if report.t_transfer_s > 0:
            report.goodput_mbps = moved * 8 / report.t_transfer_s / 1e6
