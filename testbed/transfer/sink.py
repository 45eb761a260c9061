"""Where verified chunks go on the server: a file (``.part``, renamed on success) or nowhere.

``FileSink`` keeps the first ``store_bytes`` bytes of the object in ``<dir>/<transfer_id>.part``
and, on success, renames it atomically to ``<dir>/<transfer_id>``: a final file exists only for
a verified object. When the whole object is stored, a sidecar ``<transfer_id>.part.sha256s``
(one JSON header line, then the raw SHA-256 of every verified chunk in order) lets a restarted
server rebuild its resume point from disk (:func:`recover_file_sink`). ``DiscardSink`` stores
nothing: ballast is only hashed.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from testbed.transfer.protocol import Hello

PART_SUFFIX = ".part"
SIDECAR_SUFFIX = ".part.sha256s"


class DiscardSink:
    """Verify-only sink (ballast, or a server without storage for the unstored tail)."""

    path: Path | None = None

    def write_chunk(self, index: int, data: memoryview, digest: bytes) -> None:
        pass

    def finalize(self) -> Path | None:
        return None

    def discard(self) -> None:
        pass

    def close(self) -> None:
        pass


class FileSink:
    """Writes the stored region of verified chunks into ``.part``; atomic rename on success."""

    def __init__(self, directory: Path, hello: Hello, *, fsync: bool = True, _resume: bool = False) -> None:
        self.hello = hello
        self.path = Path(directory) / hello.transfer_id
        self.part_path = self.path.with_name(hello.transfer_id + PART_SUFFIX)
        self.sidecar_path = self.path.with_name(hello.transfer_id + SIDECAR_SUFFIX)
        self._fsync = fsync
        self._keep_sidecar = hello.store_bytes == hello.size_bytes
        flags = os.O_RDWR | os.O_CREAT | (0 if _resume else os.O_TRUNC)
        self._fd: int | None = os.open(self.part_path, flags, 0o644)
        self._side = None
        try:
            if self._keep_sidecar:
                self._side = open(self.sidecar_path, "r+b" if _resume else "wb")  # noqa: SIM115 (closed in close())
                if not _resume:
                    self._side.write(_sidecar_header(hello))
                    self._side.flush()
            else:
                _unlink(self.sidecar_path)
        except BaseException:
            self.close()
            raise
        # no preallocation: the file grows with verified chunks only (written in order), so a declared
        # size costs no disk, not even a sparse extent, until bytes are verified

    def write_chunk(self, index: int, data: memoryview, digest: bytes) -> None:
        """Called for chunk ``index`` once it is the next in order and verified."""
        offset = index * self.hello.chunk_bytes
        keep = min(len(data), self.hello.store_bytes - offset)
        pos = 0
        while pos < keep:
            pos += os.pwrite(self._fd, data[pos:keep], offset + pos)
        if self._side is not None:
            self._side.write(digest)
            self._side.flush()

    def finalize(self) -> Path:
        if self._fsync:
            os.fsync(self._fd)
        self.close()
        os.replace(self.part_path, self.path)
        _unlink(self.sidecar_path)
        if self._fsync:
            dfd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        return self.path

    def discard(self) -> None:
        """Drop the partial object (it failed whole-object verification or was superseded)."""
        self.close()
        _unlink(self.part_path)
        _unlink(self.sidecar_path)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._side is not None:
            self._side.close()
            self._side = None


def recover_file_sink(directory: Path, hello: Hello, *, fsync: bool = True):
    """Rebuild ``(sink, verified_prefix, whole_object_hasher)`` from a ``.part`` and its sidecar.

    Returns ``None`` when there is nothing usable (no sidecar, other object, partial storage).
    Each recorded chunk is re-read and re-hashed; the prefix stops at the first mismatch."""
    directory = Path(directory)
    part = directory / (hello.transfer_id + PART_SUFFIX)
    side = directory / (hello.transfer_id + SIDECAR_SUFFIX)
    if hello.store_bytes != hello.size_bytes or not (part.is_file() and side.is_file()):
        return None
    raw = side.read_bytes()
    head, sep, digests = raw.partition(b"\n")
    if not sep or head + sep != _sidecar_header(hello):
        return None
    whole = hashlib.sha256()
    prefix = 0
    with open(part, "rb") as f:
        for k in range(min(len(digests) // 32, hello.n_chunks)):
            data = f.read(hello.chunk_len(k))
            if len(data) != hello.chunk_len(k) or hashlib.sha256(data).digest() != digests[32 * k:32 * k + 32]:
                break
            whole.update(data)
            prefix = k + 1
    sink = FileSink(directory, hello, fsync=fsync, _resume=True)
    sink._side.truncate(len(head) + 1 + 32 * prefix)
    sink._side.seek(0, os.SEEK_END)
    return sink, prefix, whole


def _sidecar_header(hello: Hello) -> bytes:
    ident = {"transfer_id": hello.transfer_id, "size_bytes": hello.size_bytes, "chunk_bytes": hello.chunk_bytes,
             "sha256": hello.sha256, "chunks_sha256": hello.chunks_sha256}
    return json.dumps(ident, sort_keys=True, separators=(",", ":")).encode() + b"\n"


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass
