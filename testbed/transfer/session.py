"""One client connection after a successful HELLO: stream chunks, handle ACK/NAK, await FINAL.

The calling thread sends (a window of unacknowledged bytes bounds what the server may have to
hold after a NAK); a reader thread parses the server's messages. Both run with short socket
timeouts so that a cancel, a deadline or a stall (nothing sent and nothing received for
``io_timeout_s``) is noticed within ~0.2 s. Socket errors propagate as ``OSError``; the caller
(:func:`testbed.transfer.client.send`) turns them into a reconnect.
"""

from __future__ import annotations

import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from testbed.transfer.errors import ProtocolError, TransientError, VerificationError
from testbed.transfer.protocol import (
    CHUNK_HEADER, MSG_ACK, MSG_CHUNK, MSG_FINAL, MSG_NAK, MSG_PROGRESS, SERVER_MSG, checked_json_len, decode_json,
)
from testbed.transfer.source import Manifest, Source

POLL_S = 0.2


@dataclass
class Tally:
    """Counters that accumulate over every connection of one ``send`` call."""

    bytes_sent_total: int = 0
    chunk_resends: int = 0
    resends_of: dict[int, int] = field(default_factory=dict)
    corrupt_once: set[int] = field(default_factory=set)  # test hook: chunks to corrupt on first send
    t_first_byte: float | None = None
    t_last_ack: float | None = None
    bytes_acked: int = 0


class Session:
    def __init__(self, sock: socket.socket, source: Source, manifest: Manifest, resume_from: int, tally: Tally, *,
                 window_bytes: int, io_timeout_s: float, max_chunk_resends: int, check_stop: Callable[[], None],
                 on_progress: Callable[[int, int], None] | None) -> None:
        self.sock = sock
        self.source = source
        self.manifest = manifest
        self.tally = tally
        self.window_bytes = window_bytes
        self.io_timeout_s = io_timeout_s
        self.max_chunk_resends = max_chunk_resends
        self.check_stop = check_stop
        self.on_progress = on_progress
        self._next = resume_from
        self._inflight: dict[int, int] = {}
        self._inflight_bytes = 0
        tally.bytes_acked = min(resume_from * manifest.chunk_bytes, manifest.size_bytes)
        self._naks: deque[int] = deque()
        self._final: dict | None = None
        self._error: BaseException | None = None
        self._cond = threading.Condition()
        self._last_activity = time.monotonic()
        self._closing = False
        self._progress_seen = -1
        self.t_first_byte: float | None = None
        self.t_last_ack: float | None = None
        self.t_final: float | None = None

    def run(self) -> dict:
        """Stream until FINAL; return FINAL's JSON (``ok`` true). Raises on anything else."""
        self.sock.settimeout(POLL_S)
        reader = threading.Thread(target=self._read_loop, name="tb-xfer-reader", daemon=True)
        reader.start()
        try:
            while True:
                index = self._next_to_send()
                if index is None:
                    break
                self._send_chunk(index)
        finally:
            self._closing = True
            reader.join()
        final = self._final
        self._report_progress()
        if not final.get("ok"):
            raise VerificationError(f"server rejected the object: {final.get('error')}")
        if final.get("sha256") != self.manifest.sha256:
            raise VerificationError(f"server verified sha256 {final.get('sha256')}, expected {self.manifest.sha256}")
        return final

    # -- sending ---------------------------------------------------------------------------------
    def _next_to_send(self) -> int | None:
        n = self.manifest.n_chunks
        while True:
            self._report_progress()
            self.check_stop()
            with self._cond:
                if self._error is not None:
                    raise self._error
                if self._final is not None:
                    return None
                if self._naks:
                    return self._take_nak()
                if self._next < n:
                    length = self.manifest.chunk_len(self._next)
                    if not self._inflight or self._inflight_bytes + length <= self.window_bytes:
                        self._next += 1
                        self._add_inflight(self._next - 1)
                        return self._next - 1
                self._cond.wait(POLL_S)
                self._check_stall()

    def _report_progress(self) -> None:
        acked = self.tally.bytes_acked
        if self.on_progress is not None and acked != self._progress_seen:
            self._progress_seen = acked
            self.on_progress(acked, self.manifest.size_bytes)

    def _take_nak(self) -> int:
        index = self._naks.popleft()
        count = self.tally.resends_of.get(index, 0) + 1
        if count > self.max_chunk_resends:
            raise VerificationError(f"chunk {index} failed SHA-256 verification {count} times (source changing?)")
        self.tally.resends_of[index] = count
        self.tally.chunk_resends += 1
        self._add_inflight(index)
        return index

    def _add_inflight(self, index: int) -> None:
        length = self.manifest.chunk_len(index)
        self._inflight[index] = length
        self._inflight_bytes += length

    def _send_chunk(self, index: int) -> None:
        payload = self.source.chunk(index, self.manifest.chunk_bytes)
        if index in self.tally.corrupt_once:
            self.tally.corrupt_once.discard(index)
            bad = bytearray(payload)
            bad[len(bad) // 2] ^= 0xFF
            payload = bytes(bad)
        header = CHUNK_HEADER.pack(MSG_CHUNK, index, len(payload), self.manifest.chunk_sha256[index])
        if self.t_first_byte is None:
            self.t_first_byte = time.monotonic()
            if self.tally.t_first_byte is None:
                self.tally.t_first_byte = self.t_first_byte
        self._send_all(memoryview(header))
        self._send_all(memoryview(payload))

    def _send_all(self, view: memoryview) -> None:
        while len(view):
            self.check_stop()
            if self._error is not None:
                raise self._error
            try:
                k = self.sock.send(view)
            except TimeoutError:
                with self._cond:
                    self._check_stall()
                continue
            view = view[k:]
            self.tally.bytes_sent_total += k
            self._last_activity = time.monotonic()

    def _check_stall(self) -> None:
        idle = time.monotonic() - self._last_activity
        if idle > self.io_timeout_s:
            raise TransientError(f"link stalled: nothing sent or received for {idle:.1f} s")

    # -- receiving -------------------------------------------------------------------------------
    def _read_loop(self) -> None:
        buf = bytearray()
        try:
            while not self._closing:
                try:
                    data = self.sock.recv(65536)
                except TimeoutError:
                    continue
                if not data:
                    raise ConnectionError("server closed the connection")
                buf += data
                if self._parse(buf):
                    return
        except BaseException as e:  # noqa: BLE001 -- handed to the sending thread, which raises it
            with self._cond:
                self._error = e
                self._cond.notify_all()

    def _parse(self, buf: bytearray) -> bool:
        """Consume complete messages from ``buf``; True once FINAL arrived."""
        while len(buf) >= SERVER_MSG.size:
            kind, arg = SERVER_MSG.unpack_from(buf)
            now = time.monotonic()
            if kind == MSG_FINAL:
                end = SERVER_MSG.size + checked_json_len(arg, "final")
                if len(buf) < end:
                    return False
                final = decode_json(bytes(buf[SERVER_MSG.size:end]), "final")
                if not isinstance(final, dict):
                    raise ProtocolError("final: not a JSON object")
                with self._cond:
                    self.t_final, self._final, self._last_activity = now, final, now
                    self._cond.notify_all()
                return True
            del buf[:SERVER_MSG.size]
            with self._cond:
                self._last_activity = now
                if kind == MSG_ACK:
                    length = self._inflight.pop(arg, None)
                    if length is not None:
                        self._inflight_bytes -= length
                        self.tally.bytes_acked += length
                        self.tally.t_last_ack = self.t_last_ack = now
                elif kind == MSG_NAK:
                    length = self._inflight.pop(arg, None)
                    if length is not None:
                        self._inflight_bytes -= length
                        self._naks.append(arg)
                elif kind != MSG_PROGRESS:
                    raise ProtocolError(f"unknown server message {kind!r}")
                self._cond.notify_all()
        return False
