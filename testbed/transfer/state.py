"""Server-side state of every transfer: the verified prefix, and which connection owns it.

A transfer's state outlives its connections: after a cut, a reconnecting client gets
``resume_from = prefix`` (the leading chunks verified, stored and fed to the whole-object hash).
Chunks verified out of order (after a NAKed one) are held in memory until the gap closes; they
are dropped on disconnect, so the resume point is always a prefix. A new connection for a
transfer takes it over from a stale one (a silent outage leaves the old socket open): the old
connection is shut down and the new one waits until it has let go.
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path
from typing import Callable

from testbed.transfer.errors import ProtocolError, TransientError
from testbed.transfer.protocol import Hello
from testbed.transfer.report import TransferResult
from testbed.transfer.sink import DiscardSink, FileSink, recover_file_sink

TAKEOVER_TIMEOUT_S = 10.0


class TransferState:
    def __init__(self, hello: Hello, sink, prefix: int = 0, whole=None) -> None:
        self.hello = hello
        self.sink = sink
        self.prefix = prefix
        self.whole = whole if whole is not None else hashlib.sha256()
        self.held: dict[int, tuple[bytes, bytes]] = {}
        self.held_bytes = 0
        self.owner: object | None = None
        self.abort_owner: Callable[[], None] | None = None

    @property
    def complete(self) -> bool:
        return self.prefix == self.hello.n_chunks

    def accept(self, index: int, data: memoryview, digest: bytes, max_held_bytes: int) -> None:
        """Take verified chunk ``index``: append it if it is next, else hold it until the gap closes."""
        if index < self.prefix or index in self.held:
            return
        if index != self.prefix:
            if self.held_bytes + len(data) > max_held_bytes:
                raise ProtocolError(f"more than {max_held_bytes} bytes verified ahead of chunk {self.prefix}")
            self.held[index] = (bytes(data), digest)
            self.held_bytes += len(data)
            return
        self._append(data, digest)
        while self.prefix in self.held:
            held, held_digest = self.held.pop(self.prefix)
            self.held_bytes -= len(held)
            self._append(memoryview(held), held_digest)

    def _append(self, data: memoryview, digest: bytes) -> None:
        self.sink.write_chunk(self.prefix, data, digest)
        self.whole.update(data)
        self.prefix += 1

    def drop_held(self) -> None:
        self.held.clear()
        self.held_bytes = 0


class TransferStates:
    """All transfer states of one server, and the results of finished transfers."""

    def __init__(self, storage_dir: Path | None, *, fsync: bool) -> None:
        self.storage_dir = storage_dir
        self.fsync = fsync
        self._states: dict[str, TransferState] = {}
        self._done: dict[str, TransferResult] = {}
        self._results: list[TransferResult] = []
        self._cond = threading.Condition()

    def acquire(self, hello: Hello, owner: object,
                abort_owner: Callable[[], None]) -> TransferState | TransferResult:
        """The state for ``hello`` (resumed, recovered from disk, or new), now owned by ``owner``; or the
        result of an earlier verified transfer of this very object (a client that missed FINAL)."""
        with self._cond:
            while True:
                state = self._states.get(hello.transfer_id)
                if state is None or state.owner is None:
                    break
                state.abort_owner()
                if not self._cond.wait_for(lambda s=state: s.owner is None, timeout=TAKEOVER_TIMEOUT_S):
                    raise TransientError(f"transfer {hello.transfer_id} still busy on an old connection")
            done = self._done.get(hello.transfer_id)
            if state is None and done is not None and done.sha256 == hello.sha256 and done.size_bytes == hello.size_bytes:
                return done
            if state is not None and state.hello.identity() != hello.identity():
                state.sink.discard()
                state = None
            if state is None:
                state = self._new_state(hello)
                self._states[hello.transfer_id] = state
            state.hello = hello  # same identity
            state.owner, state.abort_owner = owner, abort_owner
            return state

    def _new_state(self, hello: Hello) -> TransferState:
        if hello.store_bytes == 0:
            return TransferState(hello, DiscardSink())
        recovered = recover_file_sink(self.storage_dir, hello, fsync=self.fsync)
        if recovered is not None:
            sink, prefix, whole = recovered
            return TransferState(hello, sink, prefix, whole)
        return TransferState(hello, FileSink(self.storage_dir, hello, fsync=self.fsync))

    def release(self, state: TransferState, owner: object) -> None:
        with self._cond:
            if state.owner is owner:
                state.drop_held()
                state.owner = state.abort_owner = None
                self._cond.notify_all()

    def finish(self, state: TransferState, result: TransferResult) -> None:
        with self._cond:
            if self._states.get(result.transfer_id) is state:
                del self._states[result.transfer_id]
            if result.ok:
                self._done[result.transfer_id] = result
            self._results.append(result)

    def results(self) -> list[TransferResult]:
        with self._cond:
            return list(self._results)

    def abort_all_and_close(self) -> None:
        """Server shutdown: cut every owning connection, close (keep) partial files."""
        with self._cond:
            states = list(self._states.values())
            for s in states:
                if s.abort_owner is not None:
                    s.abort_owner()
            self._cond.wait_for(lambda: all(s.owner is None for s in states), timeout=TAKEOVER_TIMEOUT_S)
            for s in states:
                s.sink.close()
