"""Checkpoint bytes to and from storage, timed: the I/O a migration does besides the wire.

A checkpoint is written at the source before it is sent (:func:`write_file`: create, write,
``fsync`` the file and its directory) and, at the destination, made durable once received
(:func:`persist`: ``fsync``) and read back before the job resumes (:func:`read_back`). Each
returns an :class:`IoTiming` (bytes and wall seconds). ``read_back`` first evicts the file from
the page cache (``posix_fadvise(DONTNEED)`` after the ``fsync``), so the read comes from the
storage device as a checkpoint far larger than memory would, not from the cache the transfer
has just filled (on a filesystem that ignores the advice -- tmpfs -- it is a memory read).

A phase's time is ``per file + bytes / throughput``. An emulated migration moves a scaled checkpoint,
often a few MB, whose disk time is a few ms: the same order as the per-file costs (a journal commit
per ``fsync``) and as the noise of a shared disk, so scaling it back 1000x would mostly scale the
noise and the per-file part. :func:`save_sample` and :func:`load_sample` therefore measure a phase
on at least :data:`SAMPLE_MIN_BYTES` (the scaled checkpoint, topped up with ballast through the
same path) and its per-file part on an empty file, at the same moment in the same directory;
:meth:`IoTiming.seconds_for` is then ``per_file_s + n / bytes_per_s``.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from testbed.transfer.source import BallastSource, Source

IO_CHUNK_BYTES = 4 << 20
SAMPLE_MIN_BYTES = 32 << 20  # a disk phase's throughput is measured on at least this many bytes
# (32 MiB: ~65 ms of fsync'd writes on this machine's disk, several times its fsync jitter)
PER_FILE_PROBES = 3  # the per-file part is the fastest of this many empty files: a busy disk's
# jitter only ever adds to an fsync, and one slow probe larger than the sample's own per-file
# share would leave no time for its bytes (a 5 GB load measured as 0 s)


@dataclass(frozen=True)
class IoTiming:
    """``n_bytes`` in ``files`` files moved in ``seconds`` of wall time; ``per_file_s``: the part
    of each file's time that does not grow with its bytes (measured on an empty file; 0 if not)."""

    n_bytes: int
    seconds: float
    files: int = 1
    per_file_s: float = 0.0

    @property
    def growing_s(self) -> float:
        """The seconds that grow with the bytes: all of them less each file's fixed part (never < 0)."""
        return max(0.0, self.seconds - self.files * self.per_file_s)

    @property
    def bytes_per_s(self) -> float:
        """The throughput, per-file parts left out."""
        return self.n_bytes / self.growing_s if self.growing_s > 0 else float("inf")

    def bytes_s(self, n_bytes: float) -> float:
        """The time ``n_bytes`` take at this throughput, per-file part left out."""
        return n_bytes * self.growing_s / self.n_bytes if self.n_bytes > 0 else 0.0

    def seconds_for(self, n_bytes: float) -> float:
        """One file of ``n_bytes`` (a checkpoint's real size from its scaled one): its fixed part
        plus its bytes at this throughput."""
        return self.per_file_s + self.bytes_s(n_bytes)

    def then(self, other: "IoTiming") -> "IoTiming":
        """The same file's next step (made durable, then read back): the seconds add, not the bytes."""
        return replace(self, seconds=self.seconds + other.seconds)

    def to_dict(self) -> dict:
        return {"n_bytes": self.n_bytes, "seconds": self.seconds, "files": self.files, "per_file_s": self.per_file_s}

    @classmethod
    def from_dict(cls, d: dict) -> "IoTiming":
        return cls(int(d["n_bytes"]), float(d["seconds"]), int(d["files"]), float(d["per_file_s"]))

    def __add__(self, other: "IoTiming") -> "IoTiming":
        files = self.files + other.files
        fixed = self.files * self.per_file_s + other.files * other.per_file_s
        return IoTiming(self.n_bytes + other.n_bytes, self.seconds + other.seconds, files,
                        fixed / files if files else 0.0)


NOTHING = IoTiming(0, 0.0, files=0)  # no file, no time


def write_file(path: str | os.PathLike, source: Source, *, chunk_bytes: int = IO_CHUNK_BYTES,
               sync: bool = True) -> IoTiming:
    """Write all of ``source`` to ``path`` (truncated), ``fsync`` it and its directory (``sync=False``:
    neither, as a transfer server stores received bytes). Only the writing is timed, not producing
    the bytes (ballast is generated, a real checkpoint already serialised)."""
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
        if not sync:
            return IoTiming(n, spent)
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


def load_once(path: str | os.PathLike) -> IoTiming:
    """A received file made durable and read back from the device: one load of its bytes."""
    return persist(path).then(read_back(path)[0])


def save_top_up(directory: str | os.PathLike, n_done: int, *, min_bytes: int = SAMPLE_MIN_BYTES) -> IoTiming:
    """What a save of ``n_done`` bytes lacks to be a sample: ``min_bytes - n_done`` bytes of ballast
    written with :func:`write_file` (no file if none are lacking), and ``per_file_s``, an empty file
    written the same way (the fastest of :data:`PER_FILE_PROBES`). Both files are removed."""
    path, probe = _sample_paths(directory)
    try:
        top = write_file(path, BallastSource(min_bytes - n_done, seed=11)) if n_done < min_bytes else NOTHING
        per_file_s = _fastest(lambda: write_file(probe, BallastSource(0)))
    finally:
        path.unlink(missing_ok=True)
        probe.unlink(missing_ok=True)
    return replace(top, per_file_s=per_file_s)


def load_top_up(directory: str | os.PathLike, n_done: int, *, min_bytes: int = SAMPLE_MIN_BYTES) -> IoTiming:
    """What a load of ``n_done`` bytes lacks to be a sample: ballast stored as received bytes are
    (``write_file(sync=False)``, untimed), then loaded with :func:`load_once` (no file if none are lacking), and
    ``per_file_s``, an empty file loaded the same way (the fastest of :data:`PER_FILE_PROBES`). Both files are removed."""
    path, probe = _sample_paths(directory)
    try:
        top = NOTHING
        if n_done < min_bytes:
            write_file(path, BallastSource(min_bytes - n_done, seed=13), sync=False)
            top = load_once(path)
        write_file(probe, BallastSource(0), sync=False)
        per_file_s = _fastest(lambda: load_once(probe))
    finally:
        path.unlink(missing_ok=True)
        probe.unlink(missing_ok=True)
    return replace(top, per_file_s=per_file_s)


def _fastest(probe: Callable[[], IoTiming], times: int = PER_FILE_PROBES) -> float:
    """The fastest of ``times`` runs of an empty-file probe: its fixed cost, jitter left out."""
    return min(probe().seconds for _ in range(times))


def _sample_paths(directory: str | os.PathLike) -> tuple[Path, Path]:
    """A top-up file and an empty probe beside the checkpoint (hidden, unique, removed after use)."""
    tag = secrets.token_hex(4)
    return Path(directory) / f".tb-sample-{tag}", Path(directory) / f".tb-probe-{tag}"


def sampled(done: IoTiming, top_up: IoTiming) -> IoTiming:
    """A phase's sample: its own files and the top-up, with the top-up's measured per-file part."""
    return replace(done + top_up, per_file_s=top_up.per_file_s)


def save_sample(directory: str | os.PathLike, done: IoTiming, *, min_bytes: int = SAMPLE_MIN_BYTES) -> IoTiming:
    """A save (``done``: the checkpoint's files, written with :func:`write_file`) measured on at least
    ``min_bytes``, with its per-file part (:func:`save_top_up`)."""
    return sampled(done, save_top_up(directory, done.n_bytes, min_bytes=min_bytes))


def load_sample(directory: str | os.PathLike, done: IoTiming, *, min_bytes: int = SAMPLE_MIN_BYTES) -> IoTiming:
    """A load (``done``: the received file, :func:`load_once`) measured on at least ``min_bytes``,
    with its per-file part (:func:`load_top_up`)."""
    return sampled(done, load_top_up(directory, done.n_bytes, min_bytes=min_bytes))


def fsync_dir(directory: str | os.PathLike) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
