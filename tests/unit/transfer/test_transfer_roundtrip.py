"""Transfers over loopback: round trips, verification, refusals, atomic files, timings, throughput."""

from __future__ import annotations

import hashlib
import os

import pytest

from testbed.transfer import BallastSource, ConcatSource, FileSource, Manifest, TransferServer, send
from testbed.transfer.source import Source

TOKEN = "s3cret"
CHUNK = 256 * 1024


@pytest.fixture
def ckpt(tmp_path):
    p = tmp_path / "model.pt"
    p.write_bytes(os.urandom(3 * CHUNK + 12_345))
    return p


def _send(srv, source, tid, **kw):
    kw.setdefault("chunk_bytes", CHUNK)
    return send("127.0.0.1", srv.port, source, transfer_id=tid, token=kw.pop("token", TOKEN), **kw)


def test_file_round_trip(server, ckpt):
    r = _send(server, FileSource(ckpt), "ck-1")
    assert r.status == "completed", r.error
    data = ckpt.read_bytes()
    assert r.sha256 == hashlib.sha256(data).hexdigest()
    assert r.chunks == 4 and r.chunk_resends == 0 and r.reconnects == 0 and r.sessions == 1
    final = server.storage_dir / "ck-1"
    assert r.server_path == str(final)
    assert final.read_bytes() == data
    assert sorted(p.name for p in server.storage_dir.iterdir()) == ["ck-1"]  # no .part, no sidecar left
    (res,) = server.results()
    assert res.ok and res.sha256 == r.sha256 and res.path == final and res.stored_bytes == len(data)


def test_ballast_round_trip_stores_nothing(server):
    src = BallastSource(5_000_000, seed=4)
    r = _send(server, src, "ballast-1")
    assert r.status == "completed", r.error
    assert r.sha256 == hashlib.sha256(src.read(0, src.size_bytes)).hexdigest()
    assert r.bytes_sent_total >= src.size_bytes
    assert r.server_path is None and list(server.storage_dir.iterdir()) == []
    assert server.results()[0].sha256 == r.sha256


def test_checkpoint_plus_ballast_stores_exactly_the_checkpoint(server, ckpt):
    src = ConcatSource(FileSource(ckpt), BallastSource(2_000_000, seed=9))
    r = _send(server, src, "mixed")
    assert r.status == "completed", r.error
    assert (server.storage_dir / "mixed").read_bytes() == ckpt.read_bytes()
    assert r.size_bytes == ckpt.stat().st_size + 2_000_000


def test_empty_object(server):
    r = _send(server, BallastSource(0), "empty")
    assert r.status == "completed", r.error
    assert r.sha256 == hashlib.sha256(b"").hexdigest()


def test_corrupted_chunk_is_naked_and_resent(server, ckpt):
    r = _send(server, FileSource(ckpt), "corrupt", corrupt_chunks={1})
    assert r.status == "completed", r.error
    assert r.chunk_resends == 1
    size = ckpt.stat().st_size
    assert r.bytes_sent_total == size + CHUNK + 5 * 45  # one chunk twice, 45-byte frame headers
    assert (server.storage_dir / "corrupt").read_bytes() == ckpt.read_bytes()


def test_bad_token_fails_clearly_and_stores_nothing(server, ckpt):
    r = _send(server, FileSource(ckpt), "intruder", token="wrong")
    assert r.status == "failed"
    assert "bad token" in r.error and "Refused" in r.error
    assert r.reconnects == 0 and r.bytes_sent_total == 0
    assert list(server.storage_dir.iterdir()) == []
    assert server.results() == []


def test_storing_needs_a_storage_dir(ckpt):
    with TransferServer("127.0.0.1", token=TOKEN) as srv:
        r = _send(srv, FileSource(ckpt), "nowhere")
        assert r.status == "failed" and "storage_dir" in r.error
        assert _send(srv, FileSource(ckpt), "nowhere", store_bytes=0).status == "completed"


class _LyingSource(Source):
    """Correct chunk digests, wrong whole-object digest: only the final check can catch it."""

    def __init__(self, inner: Source) -> None:
        super().__init__()
        self.inner = inner

    size_bytes = property(lambda self: self.inner.size_bytes)
    store_bytes = property(lambda self: self.inner.store_bytes)

    def read(self, offset, n):
        return self.inner.read(offset, n)

    def _compute_manifest(self, chunk_bytes, workers):
        m = self.inner.manifest(chunk_bytes)
        return Manifest(m.size_bytes, m.chunk_bytes, m.chunk_sha256, "0" * 64)


def test_whole_object_mismatch_fails_and_leaves_no_file(server, ckpt):
    r = _send(server, _LyingSource(FileSource(ckpt)), "liar")
    assert r.status == "failed"
    assert "SHA-256 mismatch" in r.error
    assert list(server.storage_dir.iterdir()) == []  # .part and sidecar removed, no final file
    (res,) = server.results()
    assert not res.ok and res.path is None


def test_resending_a_completed_object_is_idempotent(server, ckpt):
    assert _send(server, FileSource(ckpt), "again").status == "completed"
    r = _send(server, FileSource(ckpt), "again")
    assert r.status == "completed" and r.bytes_sent_total == 0 and r.resume_points == [r.chunks]


def test_report_timings_are_consistent(server):
    r = _send(server, BallastSource(20_000_000, seed=1), "timed", chunk_bytes=1 << 20)
    assert r.status == "completed"
    assert 0 < r.t_transfer_s <= r.t_total_s
    assert r.t_connect_s + r.t_manifest_s + r.t_transfer_s + r.t_verify_s <= r.t_total_s + 1e-6
    assert r.goodput_mbps == pytest.approx(r.size_bytes * 8 / r.t_transfer_s / 1e6)
    names = [p[0] for p in r.phases]
    assert names == ["manifest", "connect", "transfer", "verify"]
    assert all(a <= b for _, a, b in r.phases)
    assert all(r.phases[i][2] <= r.phases[i + 1][1] + 1e-6 for i in range(len(r.phases) - 1))
    assert r.phases[0][1] >= r.started_at_monotonic
    d = r.to_dict()
    assert d["status"] == "completed" and d["phases"][2][0] == "transfer"


def test_loopback_throughput_smoke(server):
    src = BallastSource(512 * 1024 * 1024, seed=5)
    src.manifest(4 << 20)  # hashing ahead, as a node agent would
    r = _send(server, src, "smoke", chunk_bytes=4 << 20)
    assert r.status == "completed", r.error
    print(f"\nloopback goodput: {r.goodput_mbps:.0f} Mbit/s ({r.t_transfer_s:.2f} s for 512 MiB)")
    assert r.goodput_mbps > 200


def test_progress_callback_reaches_the_size(server):
    seen = []
    r = _send(server, BallastSource(3_000_000), "progress", on_progress=lambda done, size: seen.append((done, size)))
    assert r.status == "completed"
    assert seen and all(size == 3_000_000 for _, size in seen)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_invalid_arguments_raise(server):
    with pytest.raises(ValueError, match="transfer_id"):
        send("127.0.0.1", server.port, BallastSource(10), transfer_id="../x", token=TOKEN)
    with pytest.raises(ValueError, match="token"):
        TransferServer(token="")


class _ChangingSource(_LyingSource):
    """Chunk 2's bytes no longer match the manifest (the file changed after hashing)."""

    def _compute_manifest(self, chunk_bytes, workers):
        return self.inner.manifest(chunk_bytes)

    def read(self, offset, n):
        data = bytearray(self.inner.read(offset, n))
        if offset == 2 * CHUNK:
            data[0] ^= 1
        return bytes(data)


def test_a_chunk_that_never_verifies_fails_the_transfer(server, ckpt):
    r = _send(server, _ChangingSource(FileSource(ckpt)), "changing", max_chunk_resends=2)
    assert r.status == "failed"
    assert "chunk 2 failed SHA-256 verification 3 times" in r.error
    assert r.chunk_resends == 2
    assert not (server.storage_dir / "changing").exists()


def test_callback_errors_surface_on_exit(tmp_path):
    def boom(result):
        raise RuntimeError("callback broke")

    srv = TransferServer("127.0.0.1", token=TOKEN, on_complete=boom)
    with pytest.raises(Exception, match="callback broke") as info:
        with srv:
            assert _send(srv, BallastSource(10_000), "cb").status == "completed"
    assert isinstance(srv.errors()[0], RuntimeError)
    assert "handler failed" in str(info.value)


def test_stopping_the_server_mid_transfer_is_prompt_and_keeps_the_part_file(tmp_path, ckpt):
    import threading
    import time

    store = tmp_path / "store2"
    store.mkdir()
    srv = TransferServer("127.0.0.1", token=TOKEN, storage_dir=store, fsync=False).start()
    started, stopped = threading.Event(), threading.Event()
    stopper = threading.Thread(target=lambda: (started.wait(10), srv.stop(), stopped.set()))
    stopper.start()
    big = tmp_path / "big.pt"
    big.write_bytes(os.urandom(64 * 1024 * 1024))
    t = time.monotonic()
    r = _send(srv, FileSource(big), "stopped", max_retries=1, backoff_s=0.01,
              # the client pauses at its first progress report until the server has stopped
              on_progress=lambda done, size: done and (started.set(), stopped.wait(10)))
    stopper.join()
    assert time.monotonic() - t < 10
    assert r.status == "failed"
    assert not (store / "stopped").exists()
    assert (store / "stopped.part").exists()
