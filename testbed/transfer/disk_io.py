"""Checkpoint bytes to and from storage, timed: the I/O a migration does besides the wire.

A checkpoint is written at the source before it is sent (:func:`write_file`: create, write,
``fsync`` the file and its directory) and, at the destination, made durable once received
(:func:`persist`: ``fsync``) and read back before the job resumes (:func:`read_back`). Each
returns an :class:`IoTiming` (bytes and wall seconds). ``read_back`` first evicts the file from
the page cache (``posix_fadvise(DONTNEED)`` after the ``fsync``), so the read comes from the
storage device as a checkpoint far larger than memory would, not from the cache the transfer
has just filled (on a filesystem that ignores the advice -- tmpfs -- it is a memory read).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from testbed.transfer.source import Source

IO_CHUNK_BYTES = 4 << 20


@dataclass(frozen=True)
class IoTiming:
    """``n_bytes`` moved in ``seconds`` of wall time."""

    n_bytes: int
    seconds: float

    @property
    def bytes_per_s(self) -> float:
        return self.n_bytes / self.seconds if self.seconds > 0 else float("inf")

    def seconds_for(self, n_bytes: float) -> float:
        """The time for ``n_bytes`` at this throughput (a checkpoint's real size from its scaled one)."""
        return n_bytes * self.seconds / self.n_bytes if self.n_bytes > 0 else 0.0

    def __add__(self, other: "IoTiming") -> "IoTiming":
        return IoTiming(self.n_bytes + other.n_bytes, self.seconds + other.seconds)


def write_file(path: str | os.PathLike, source: Source, *, chunk_bytes: int = IO_CHUNK_BYTES) -> IoTiming:
    """Write all of ``source`` to ``path`` (truncated), ``fsync`` it and its directory. Only the
    writing is timed, not producing the bytes (ballast is generated, a real checkpoint already
    serialised)."""
    path = Path(path)
    n = source.size_bytes
    spent = 0.0
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        off = 0
        while off < n:
            data = source.read(off, min(chunk_bytes, n - off))
            t0 = time.perf_counter()
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            spent += time.perf_counter() - t0
            off += len(data)
        t0 = time.perf_counter()
        os.fsync(fd)
        spent += time.perf_counter() - t0
    finally:
        os.close(fd)
    t0 = time.perf_counter()
    fsync_dir(path.parent)
    return IoTiming(n, spent + time.perf_counter() - t0)


def persist(path: str | os.PathLike) -> IoTiming:
    """``fsync`` a file written without it (a received checkpoint) and its directory."""
    path = Path(path)
    t0 = time.perf_counter()
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        n = os.fstat(fd).st_size
    finally:
        os.close(fd)
    fsync_dir(path.parent)
    return IoTiming(n, time.perf_counter() - t0)


def drop_cache(path: str | os.PathLike) -> None:
    """Evict a (synced) file's pages from the page cache."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def read_back(path: str | os.PathLike, *, uncached: bool = True, keep: int = 0,
              on_chunk: Callable[[memoryview], None] | None = None,
              chunk_bytes: int = IO_CHUNK_BYTES) -> tuple[IoTiming, bytes]:
    """Read ``path`` whole (from the device when ``uncached``); returns the timing and its first
    ``keep`` bytes (e.g. the real checkpoint in front of ballast). ``on_chunk`` sees every chunk
    (a hash), outside the timed reads."""
    head = bytearray()
    spent = 0.0
    n = 0
    if uncached:
        drop_cache(path)
    buf = bytearray(chunk_bytes)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as f:
        while True:
            t0 = time.perf_counter()
            got = f.readinto(view)
            spent += time.perf_counter() - t0
            if not got:
                break
            if len(head) < keep:
                head += view[:min(got, keep - len(head))]
            if on_chunk is not None:
                on_chunk(view[:got])
            n += got
    return IoTiming(n, spent), bytes(head)


def fsync_dir(directory: str | os.PathLike) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
