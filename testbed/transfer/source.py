"""What is sent: a file, deterministic ballast, or a concatenation, and its SHA-256 manifest.

A source is a read-only byte string of ``size_bytes`` bytes addressed by offset
(:meth:`Source.read`). Chunk ``i`` under a chunk size ``chunk_bytes`` is the byte range
``[i * chunk_bytes, min((i + 1) * chunk_bytes, size_bytes))``; the manifest holds the SHA-256
of every chunk and of the whole object. Manifests are computed lazily, once per chunk size, and
cached on the source object: build a source once and call :meth:`Source.manifest` ahead of a
migration if the hashing time must not count (it runs at ~1 GB/s, chunk hashes in a thread pool).

``store_bytes`` is how many leading bytes a receiver should keep on disk: all of a file, none of
the ballast, and for ``ConcatSource(file, ballast)`` exactly the file (the rest is only verified).
"""

from __future__ import annotations

import hashlib
import os
import struct
import threading
from abc import ABC, abstractmethod
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from testbed.transfer.errors import SourceChangedError

BALLAST_BLOCK_BYTES = 1 << 20
_BALLAST_HEADER = struct.Struct("!8sQQ")  # magic, seed, block index: every block (and chunk) differs
_BALLAST_MAGIC = b"tb-balst"
_MAX_SEED = 1 << 64


def n_chunks_of(size_bytes: int, chunk_bytes: int) -> int:
    return -(-size_bytes // chunk_bytes)


@dataclass(frozen=True)
class Manifest:
    """Per-chunk SHA-256 digests (raw 32 bytes each) and the whole-object SHA-256 (hex)."""

    size_bytes: int
    chunk_bytes: int
    chunk_sha256: tuple[bytes, ...]
    sha256: str

    @property
    def n_chunks(self) -> int:
        return len(self.chunk_sha256)

    @property
    def chunks_sha256(self) -> str:
        """SHA-256 of the concatenated chunk digests: identifies the chunking of this object."""
        return hashlib.sha256(b"".join(self.chunk_sha256)).hexdigest()

    def chunk_len(self, index: int) -> int:
        return min(self.chunk_bytes, self.size_bytes - index * self.chunk_bytes)


class Source(ABC):
    """Read-only bytes addressed by offset, with a lazily computed, cached manifest."""

    def __init__(self) -> None:
        self._manifests: dict[int, Manifest] = {}
        self._manifest_lock = threading.Lock()

    @property
    @abstractmethod
    def size_bytes(self) -> int: ...

    @property
    @abstractmethod
    def store_bytes(self) -> int:
        """Leading bytes a receiver should keep on disk (the rest is verified and discarded)."""

    @abstractmethod
    def read(self, offset: int, n: int) -> bytes:
        """Exactly ``n`` bytes from ``offset`` (``offset + n <= size_bytes``)."""

    def n_chunks(self, chunk_bytes: int) -> int:
        return n_chunks_of(self.size_bytes, chunk_bytes)

    def chunk(self, index: int, chunk_bytes: int) -> bytes:
        if not 0 <= index < self.n_chunks(chunk_bytes):
            raise IndexError(f"chunk {index} out of range 0..{self.n_chunks(chunk_bytes) - 1}")
        offset = index * chunk_bytes
        return self.read(offset, min(chunk_bytes, self.size_bytes - offset))

    def manifest(self, chunk_bytes: int, *, workers: int | None = None) -> Manifest:
        """Per-chunk and whole-object SHA-256 (computed once per ``chunk_bytes``, then cached)."""
        if chunk_bytes <= 0:
            raise ValueError(f"chunk_bytes must be positive, got {chunk_bytes}")
        with self._manifest_lock:
            if chunk_bytes not in self._manifests:
                self._manifests[chunk_bytes] = self._compute_manifest(chunk_bytes, workers)
            return self._manifests[chunk_bytes]

    def _compute_manifest(self, chunk_bytes: int, workers: int | None) -> Manifest:
        # This thread reads chunks in order and feeds the whole-object hash; the pool hashes chunks
        # (hashlib releases the GIL), with a bounded number in flight to bound memory.
        workers = workers or max(1, min(4, (os.cpu_count() or 2) - 1))
        whole = hashlib.sha256()
        digests: list[bytes] = []
        pending: deque = deque()
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tb-manifest") as pool:
            for i in range(self.n_chunks(chunk_bytes)):
                data = self.chunk(i, chunk_bytes)
                pending.append(pool.submit(_sha256_digest, data))
                whole.update(data)
                while len(pending) > 2 * workers:
                    digests.append(pending.popleft().result())
            digests.extend(f.result() for f in pending)
        return Manifest(self.size_bytes, chunk_bytes, tuple(digests), whole.hexdigest())


def _sha256_digest(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


class FileSource(Source):
    """A file's bytes. Its size is fixed at construction; a read that sees another size raises."""

    def __init__(self, path: str | os.PathLike) -> None:
        super().__init__()
        self.path = Path(path)
        self._size = self.path.stat().st_size

    @property
    def size_bytes(self) -> int:
        return self._size

    @property
    def store_bytes(self) -> int:
        return self._size

    def read(self, offset: int, n: int) -> bytes:
        fd = os.open(self.path, os.O_RDONLY)
        try:
            if os.fstat(fd).st_size != self._size:
                raise SourceChangedError(f"{self.path}: size changed from {self._size} bytes")
            data = os.pread(fd, n, offset)
        finally:
            os.close(fd)
        if len(data) != n:
            raise SourceChangedError(f"{self.path}: short read at offset {offset}")
        return data

    def __repr__(self) -> str:
        return f"FileSource({str(self.path)!r}, size_bytes={self._size})"


class BallastSource(Source):
    """Deterministic pseudo-random bytes standing in for the bulk of a paper-scale checkpoint.

    The object is a grid of 1 MiB blocks; block ``j`` is a 24-byte header (magic, seed, j) followed
    by one random body drawn once from ``PCG64(seed)``. Reads are memory copies (several GB/s), every
    chunk has a distinct digest, and the bytes depend only on ``(size_bytes, seed)``, not on the
    chunk size. Not compressible in practice (the body is random), so no link-level compression
    could inflate the measured goodput.
    """

    def __init__(self, size_bytes: int, seed: int = 0) -> None:
        super().__init__()
        if size_bytes < 0:
            raise ValueError(f"size_bytes must be >= 0, got {size_bytes}")
        if not 0 <= seed < _MAX_SEED:
            raise ValueError(f"seed must be in [0, 2**64), got {seed}")
        self._size = int(size_bytes)
        self.seed = int(seed)
        self._body: bytes | None = None

    @property
    def size_bytes(self) -> int:
        return self._size

    @property
    def store_bytes(self) -> int:
        return 0

    def _block_body(self) -> bytes:
        if self._body is None:
            import numpy as np

            gen = np.random.Generator(np.random.PCG64(self.seed))
            self._body = gen.bytes(BALLAST_BLOCK_BYTES - _BALLAST_HEADER.size)
        return self._body

    def read(self, offset: int, n: int) -> bytes:
        if offset < 0 or n < 0 or offset + n > self._size:
            raise IndexError(f"read [{offset}, {offset + n}) outside ballast of {self._size} bytes")
        body = memoryview(self._block_body())
        hdr_len = _BALLAST_HEADER.size
        pieces: list = []
        pos, end = offset, offset + n
        while pos < end:
            block, lo = divmod(pos, BALLAST_BLOCK_BYTES)
            hi = min(BALLAST_BLOCK_BYTES, lo + (end - pos))
            if lo < hdr_len:
                header = _BALLAST_HEADER.pack(_BALLAST_MAGIC, self.seed, block)
                pieces.append(header[lo:min(hi, hdr_len)])
            if hi > hdr_len:
                pieces.append(body[max(lo, hdr_len) - hdr_len:hi - hdr_len])
            pos += hi - lo
        return b"".join(pieces)

    def __repr__(self) -> str:
        return f"BallastSource(size_bytes={self._size}, seed={self.seed})"


class ConcatSource(Source):
    """Sources back to back, e.g. ``ConcatSource(FileSource(ckpt), BallastSource(n, seed))``."""

    def __init__(self, *sources: Source) -> None:
        super().__init__()
        if not sources:
            raise ValueError("ConcatSource needs at least one source")
        self.parts = tuple(sources)
        self._starts: list[int] = []
        total = 0
        for s in self.parts:
            self._starts.append(total)
            total += s.size_bytes
        self._size = total

    @property
    def size_bytes(self) -> int:
        return self._size

    @property
    def store_bytes(self) -> int:
        # The stored region must be a prefix: leading fully stored parts, plus one partial part.
        stored = 0
        for s in self.parts:
            stored += s.store_bytes
            if s.store_bytes < s.size_bytes:
                break
        return stored

    def read(self, offset: int, n: int) -> bytes:
        if offset < 0 or n < 0 or offset + n > self._size:
            raise IndexError(f"read [{offset}, {offset + n}) outside object of {self._size} bytes")
        pieces: list[bytes] = []
        pos, end = offset, offset + n
        for start, s in zip(self._starts, self.parts):
            stop = start + s.size_bytes
            if stop <= pos or s.size_bytes == 0:
                continue
            if start >= end:
                break
            take = min(end, stop) - pos
            pieces.append(s.read(pos - start, take))
            pos += take
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    def __repr__(self) -> str:
        return f"ConcatSource({', '.join(map(repr, self.parts))})"
