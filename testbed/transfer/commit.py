"""Pipelined commit of verified chunks on the server: sink write + whole-object hash in a second thread.

The connection thread receives a chunk into a pooled buffer and checks its SHA-256; the commit
thread appends it to the transfer state (file write, whole-object hash). The two SHA-256 passes
run in parallel (hashlib releases the GIL), which roughly doubles the receiving ceiling on a
multi-core host. A small buffer pool gives back-pressure: the receiver waits when commits lag.
Buffers are anonymous mappings: a page costs memory only once received bytes land in it, so a
declared chunk size allocates nothing by itself.
"""

from __future__ import annotations

import mmap
import queue
import threading

from testbed.transfer.state import TransferState

POOL_BUFFERS = 3


class Committer:
    """``with Committer(state, chunk_bytes, max_held_bytes) as c: buf = c.buffer(); ...; c.submit(...)``.

    Leaving the block waits for every submitted chunk to be committed, so the transfer's verified
    prefix is final when the connection lets the state go. ``error`` holds a commit failure; the
    receiver calls :meth:`raise_if_failed` and stops."""

    def __init__(self, state: TransferState, chunk_bytes: int, max_held_bytes: int) -> None:
        self.state = state
        self.max_held_bytes = max_held_bytes
        self._free: queue.Queue[memoryview] = queue.Queue()
        for _ in range(POOL_BUFFERS):
            self._free.put(memoryview(mmap.mmap(-1, chunk_bytes)))
        self._work: queue.Queue = queue.Queue()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="tb-xfer-commit", daemon=True)

    def __enter__(self) -> "Committer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._work.put(None)
        self._thread.join()

    def buffer(self) -> memoryview:
        """A free chunk buffer (waits while every buffer is queued for commit)."""
        self.raise_if_failed()
        return self._free.get()

    def release(self, buf: memoryview) -> None:
        """Give back a buffer that will not be submitted (a NAKed chunk)."""
        self._free.put(buf)

    def submit(self, index: int, buf: memoryview, length: int, digest: bytes) -> None:
        self._work.put((index, buf, length, digest))

    def raise_if_failed(self) -> None:
        if self.error is not None:
            raise self.error

    def _run(self) -> None:
        while (item := self._work.get()) is not None:
            index, buf, length, digest = item
            try:
                if self.error is None:
                    self.state.accept(index, buf[:length], digest, self.max_held_bytes)
            except BaseException as e:  # noqa: BLE001 -- handed to the receiving thread
                self.error = e
            finally:
                self._free.put(buf)
