"""Checkpoint bytes to and from storage, timed (testbed.transfer.disk_io)."""

from __future__ import annotations

import hashlib

import pytest

from testbed.transfer.disk_io import IoTiming, persist, read_back, write_file
from testbed.transfer.source import BallastSource


def test_write_persist_read_back_move_every_byte(tmp_path):
    src = BallastSource(3 * (1 << 20) + 17, seed=5)
    path = tmp_path / "ckpt"
    w = write_file(path, src, chunk_bytes=1 << 20)
    assert w.n_bytes == src.size_bytes == path.stat().st_size and w.seconds > 0
    assert path.read_bytes() == src.read(0, src.size_bytes)
    p = persist(path)
    assert p.n_bytes == src.size_bytes and p.seconds > 0
    h = hashlib.sha256()
    r, head = read_back(path, keep=1000, on_chunk=h.update, chunk_bytes=1 << 20)
    assert r.n_bytes == src.size_bytes and r.seconds > 0
    assert head == src.read(0, 1000) and h.hexdigest() == hashlib.sha256(path.read_bytes()).hexdigest()
    assert read_back(path, uncached=False, keep=10**9)[1] == path.read_bytes()  # keep > size: the whole file


def test_an_empty_file_is_written_and_read(tmp_path):
    w = write_file(tmp_path / "e", BallastSource(0))
    assert w.n_bytes == 0 and (tmp_path / "e").stat().st_size == 0
    assert read_back(tmp_path / "e")[0].n_bytes == 0


def test_scaling_back_to_the_real_size_is_proportional():
    t = IoTiming(10_000_000, 0.05)  # 200 MB/s measured on 10 MB
    assert t.bytes_per_s == pytest.approx(2e8)
    assert t.seconds_for(40e9) == pytest.approx(200.0)  # a 40 GB checkpoint at that throughput
    assert t.seconds_for(20e9) == pytest.approx(t.seconds_for(40e9) / 2)
    both = t + IoTiming(30_000_000, 0.10)
    assert (both.n_bytes, both.seconds) == (40_000_000, pytest.approx(0.15))
    assert IoTiming(0, 0.0).seconds_for(1e9) == 0.0 and IoTiming(5, 0.0).bytes_per_s == float("inf")


def test_a_missing_file_is_an_os_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        persist(tmp_path / "nope")
    with pytest.raises(FileNotFoundError):
        read_back(tmp_path / "nope")
