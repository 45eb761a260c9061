"""Sources: deterministic ballast, concatenation, file reads, manifests equal to plain hashlib."""

from __future__ import annotations

import hashlib
import time

import pytest

from testbed.transfer.errors import SourceChangedError
from testbed.transfer.source import BALLAST_BLOCK_BYTES, BallastSource, ConcatSource, FileSource


def _all(source) -> bytes:
    return source.read(0, source.size_bytes)


def test_ballast_is_deterministic_and_seeded():
    a, b, c = BallastSource(3_000_000, seed=7), BallastSource(3_000_000, seed=7), BallastSource(3_000_000, seed=8)
    assert _all(a) == _all(b)
    assert _all(a) != _all(c)
    assert len(_all(a)) == 3_000_000


def test_ballast_reads_are_consistent_at_any_offset():
    s = BallastSource(5 * BALLAST_BLOCK_BYTES + 123, seed=1)
    whole = _all(s)
    for offset, n in [(0, 1), (10, 30), (BALLAST_BLOCK_BYTES - 5, 40), (3 * BALLAST_BLOCK_BYTES + 7, 2_000_000),
                      (s.size_bytes - 3, 3), (s.size_bytes, 0)]:
        assert s.read(offset, n) == whole[offset:offset + n]
    with pytest.raises(IndexError):
        s.read(s.size_bytes - 1, 2)


def test_ballast_chunks_all_differ_and_bytes_do_not_depend_on_chunk_size():
    s = BallastSource(8 * BALLAST_BLOCK_BYTES, seed=3)
    m = s.manifest(BALLAST_BLOCK_BYTES)
    assert len(set(m.chunk_sha256)) == m.n_chunks == 8
    assert s.manifest(64 * 1024).sha256 == m.sha256 == hashlib.sha256(_all(s)).hexdigest()


def test_ballast_generation_is_fast():
    s = BallastSource(512 * 1024 * 1024, seed=0)
    t = time.perf_counter()
    for i in range(s.n_chunks(4 << 20)):
        s.chunk(i, 4 << 20)
    gbps = s.size_bytes / (time.perf_counter() - t) / 1e9
    print(f"ballast generation: {gbps:.2f} GB/s")
    assert gbps > 1.0


def test_manifest_matches_hashlib_and_is_cached(tmp_path):
    p = tmp_path / "ck.bin"
    p.write_bytes(bytes(range(256)) * 5000 + b"tail")
    s = FileSource(p)
    m = s.manifest(4096)
    data = p.read_bytes()
    assert m.sha256 == hashlib.sha256(data).hexdigest()
    assert m.n_chunks == -(-len(data) // 4096)
    assert all(m.chunk_sha256[i] == hashlib.sha256(data[i * 4096:(i + 1) * 4096]).digest() for i in range(m.n_chunks))
    assert m.chunk_len(m.n_chunks - 1) == len(data) % 4096
    assert s.manifest(4096) is m
    assert s.store_bytes == len(data)


def test_file_source_detects_a_changed_file(tmp_path):
    p = tmp_path / "ck.bin"
    p.write_bytes(b"x" * 10_000)
    s = FileSource(p)
    p.write_bytes(b"x" * 9_000)
    with pytest.raises(SourceChangedError):
        s.chunk(0, 4096)


def test_concat_reads_across_parts_and_stores_only_the_file(tmp_path):
    p = tmp_path / "ck.bin"
    p.write_bytes(b"checkpoint-bytes" * 1000)
    f, b = FileSource(p), BallastSource(100_000, seed=2)
    c = ConcatSource(f, b)
    whole = _all(f) + _all(b)
    assert c.size_bytes == len(whole)
    assert _all(c) == whole
    assert c.read(15_990, 30) == whole[15_990:16_020]
    assert c.store_bytes == f.size_bytes
    assert ConcatSource(b, f).store_bytes == 0
    assert c.manifest(4096).sha256 == hashlib.sha256(whole).hexdigest()


def test_invalid_ballast_arguments():
    with pytest.raises(ValueError):
        BallastSource(-1)
    with pytest.raises(ValueError):
        BallastSource(10, seed=-1)
    with pytest.raises(ValueError):
        ConcatSource()
