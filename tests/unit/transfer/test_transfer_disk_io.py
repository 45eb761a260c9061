"""Checkpoint bytes to and from storage, timed (testbed.transfer.disk_io)."""

from __future__ import annotations

import hashlib
from dataclasses import replace

import pytest

from testbed.transfer.disk_io import (
    NOTHING,
    IoTiming,
    load_once,
    load_sample,
    persist,
    read_back,
    sampled,
    save_sample,
    write_file,
)
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


def test_the_per_file_part_is_not_scaled():
    # 20 MB in 2 files in 0.1 s, of which 10 ms per file does not grow with the bytes: 250 MB/s
    t = IoTiming(20_000_000, 0.1, files=2, per_file_s=0.01)
    assert t.growing_s == pytest.approx(0.08) and t.bytes_per_s == pytest.approx(2.5e8)
    assert t.seconds_for(40e9) == pytest.approx(0.01 + 160.0)  # one file of 40 GB: its fixed part once
    assert t.bytes_s(40e9) == pytest.approx(160.0)
    assert IoTiming(10, 0.01, files=2, per_file_s=0.01).growing_s == 0.0  # jitter below the fixed part: never < 0
    summed = IoTiming(10, 1.0, 1, 0.1) + IoTiming(30, 2.0, 3, 0.5)
    assert (summed.n_bytes, summed.files) == (40, 4) and summed.files * summed.per_file_s == pytest.approx(1.6)
    assert IoTiming.from_dict(t.to_dict()) == t
    assert NOTHING + t == t and sampled(t, replace_per_file(NOTHING, 0.02)).per_file_s == 0.02


def replace_per_file(t, s):
    from dataclasses import replace

    return replace(t, per_file_s=s)


def test_load_once_times_one_pass_of_the_bytes(tmp_path):
    path = tmp_path / "recv"
    write_file(path, BallastSource(2 * (1 << 20) + 5, seed=3), sync=False)
    assert path.read_bytes() == BallastSource(2 * (1 << 20) + 5, seed=3).read(0, 2 * (1 << 20) + 5)
    t = load_once(path)
    assert t.n_bytes == path.stat().st_size and t.files == 1 and t.seconds > 0  # the bytes once, not per step


@pytest.mark.parametrize("done_mb", [0, 1, 3])
def test_samples_are_topped_up_to_the_minimum_and_leave_no_file(tmp_path, done_mb):
    done_bytes = done_mb << 20
    minimum = 2 << 20
    path = tmp_path / "ckpt"
    save = save_sample(tmp_path, write_file(path, BallastSource(done_bytes)), min_bytes=minimum)
    assert save.n_bytes == max(done_bytes, minimum) and save.per_file_s > 0
    assert save.files == 1 + (done_bytes < minimum)
    load = load_sample(tmp_path, load_once(path), min_bytes=minimum)
    assert load.n_bytes == max(done_bytes, minimum) and load.per_file_s > 0
    assert load.files == 1 + (done_bytes < minimum)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]  # the top-ups and probes are gone


@pytest.mark.parametrize("which", ["save", "load"])
def test_one_slow_empty_probe_does_not_swallow_the_bytes(tmp_path, monkeypatch, which):
    """A busy disk's fsync stalls once during the per-file probe: the per-file part is the fastest
    probe, so the sample's bytes keep their time (one probe of 1 s would have left none)."""
    import testbed.transfer.disk_io as dio

    slow = iter([1.0])  # the first empty-file probe stalls for 1 s; the others take their real time
    real = dio.write_file if which == "save" else dio.load_once

    def probe(path, *a, **kw):
        t = real(path, *a, **kw)
        return t if t.n_bytes else replace(t, seconds=next(slow, t.seconds))

    monkeypatch.setattr(dio, "write_file" if which == "save" else "load_once", probe)
    top = (dio.save_top_up if which == "save" else dio.load_top_up)(tmp_path, 0, min_bytes=4 << 20)
    assert top.per_file_s < 0.5 and top.growing_s > 0
    done = IoTiming(1 << 20, 2 * top.per_file_s + 1e-3)
    assert dio.sampled(done, top).bytes_s(1e9) > 0
