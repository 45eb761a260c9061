"""Link outages on loopback: an in-test TCP proxy cuts, blackholes or refuses connections.

The client must reconnect and resume from the server's verified prefix (never re-sending what the
server already verified), respect deadlines and cancel events, and the server must keep partial
state (in memory, and on disk for a restarted server) and never publish an unverified file.
"""

from __future__ import annotations

import os
import socket
import threading

import pytest

from testbed.transfer import BallastSource, FileSource, TransferServer, send

TOKEN = "tok"
CHUNK = 256 * 1024
MiB = 1 << 20


class CutProxy:
    """Forwards 127.0.0.1:<port> to the server. Once, after ``cut_after_bytes`` client->server bytes,
    it drops the connection (``silent=False``: both sockets closed) or freezes it (``silent=True``:
    nothing forwarded any more, sockets left open, like packets lost on a dead link). With
    ``down_after_cut`` the link then stays down: new connections are closed at once until
    ``link_down`` is cleared."""

    def __init__(self, upstream_port: int, *, cut_after_bytes: int | None = None, silent: bool = False,
                 down_after_cut: bool = False) -> None:
        self.upstream_port = upstream_port
        self.cut_after_bytes = cut_after_bytes
        self.silent = silent
        self.down_after_cut = down_after_cut
        self.link_down = threading.Event()
        self.cuts = 0
        self._lock = threading.Lock()
        self._forwarded = 0
        self._stop = threading.Event()
        self._socks: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)
        self.port = self._listener.getsockname()[1]

    def __enter__(self) -> "CutProxy":
        self._spawn(self._accept_loop)
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._threads[0].join()
        self._listener.close()
        with self._lock:
            socks = list(self._socks)
        for s in socks:
            _shutdown(s)
        for t in self._threads[1:]:
            t.join()
        for s in socks:
            s.close()

    def _spawn(self, target, *args) -> None:
        t = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(t)
        t.start()

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            if self.link_down.is_set():
                client.close()
                continue
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            frozen = threading.Event()
            with self._lock:
                self._socks += [client, upstream]
            self._spawn(self._pump, client, upstream, True, frozen)
            self._spawn(self._pump, upstream, client, False, frozen)

    def _pump(self, src: socket.socket, dst: socket.socket, upward: bool, frozen: threading.Event) -> None:
        try:
            while not frozen.is_set():
                data = src.recv(65536)
                if not data:
                    break
                if upward:
                    data = self._budget(data)
                    if data is None:  # cut here
                        if self.silent:
                            frozen.set()
                            break
                        raise ConnectionAbortedError("cut")
                if frozen.is_set():
                    break
                dst.sendall(data)
        except OSError:
            _shutdown(src)
            _shutdown(dst)
            return
        if frozen.is_set():
            self._stop.wait()  # hold the sockets open, forward nothing
        else:
            _shutdown(dst)

    def _budget(self, data: bytes) -> bytes | None:
        """Count client->server bytes; None when the cut happens within ``data`` (the part before it
        is forwarded first)."""
        with self._lock:
            if self.cut_after_bytes is None or self.cuts:
                return data
            left = self.cut_after_bytes - self._forwarded
            if len(data) < left:
                self._forwarded += len(data)
                return data
            self.cuts += 1
            if self.down_after_cut:
                self.link_down.set()
            return None


def _shutdown(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def _send(port, source, tid, **kw):
    kw.setdefault("chunk_bytes", CHUNK)
    kw.setdefault("backoff_s", 0.05)
    return send("127.0.0.1", port, source, transfer_id=tid, token=TOKEN, **kw)


def test_resume_after_a_cut(server):
    src = BallastSource(32 * MiB, seed=11)
    with CutProxy(server.port, cut_after_bytes=12 * MiB) as proxy:
        r = _send(proxy.port, src, "cut-1")
    assert proxy.cuts == 1
    assert r.status == "completed", r.error
    assert r.reconnects >= 1 and r.sessions == 2
    assert r.resume_points[0] == 0 and r.resume_points[1] > 0
    assert r.bytes_sent_total < 2 * r.size_bytes
    # the second connection sent exactly the chunks the server did not hold (plus 45-byte frame headers),
    # so the first one sent the rest, which covers at least what the server had verified
    resume = r.resume_points[1]
    second = (r.size_bytes - resume * CHUNK) + (r.chunks - resume) * 45
    assert resume * CHUNK <= r.bytes_sent_total - second
    assert [p[0] for p in r.phases].count("transfer") == 2
    assert server.results()[0].sha256 == r.sha256


def test_silent_outage_stalls_then_takes_over_the_stale_connection(server):
    src = BallastSource(16 * MiB, seed=12)
    with CutProxy(server.port, cut_after_bytes=5 * MiB, silent=True) as proxy:
        r = _send(proxy.port, src, "silent", io_timeout_s=1.0)
    assert r.status == "completed", r.error
    assert r.reconnects == 1 and r.resume_points[1] > 0
    assert r.t_transfer_s > 1.0  # includes the stall before the reconnect


def test_deadline_while_link_down_keeps_partial_state_and_a_later_send_resumes(server, store, tmp_path):
    ckpt = tmp_path / "model.pt"
    ckpt.write_bytes(os.urandom(16 * MiB))
    with CutProxy(server.port, cut_after_bytes=6 * MiB, down_after_cut=True) as proxy:
        r1 = _send(proxy.port, FileSource(ckpt), "ddl", deadline_s=1.5, max_retries=1000)
        assert r1.status == "failed" and "deadline" in r1.error.lower()
        assert r1.reconnects >= 1
        assert 1.4 < r1.t_total_s < 3.0
        assert (store / "ddl.part").exists() and not (store / "ddl").exists()
        proxy.link_down.clear()
        r2 = _send(proxy.port, FileSource(ckpt), "ddl")
    assert r2.status == "completed", r2.error
    assert r2.resume_points[0] > 0 and r2.resumed_bytes == r2.resume_points[0] * CHUNK
    assert r2.bytes_sent_total < r2.size_bytes
    assert r2.goodput_mbps == pytest.approx((r2.size_bytes - r2.resumed_bytes) * 8 / r2.t_transfer_s / 1e6)
    assert (store / "ddl").read_bytes() == ckpt.read_bytes()
    assert sorted(p.name for p in store.iterdir()) == ["ddl"]


def test_retries_without_progress_are_bounded(server):
    with CutProxy(server.port) as proxy:
        proxy.link_down.set()
        r = _send(proxy.port, BallastSource(MiB), "down", max_retries=2, backoff_s=0.01)
    assert r.status == "failed" and "gave up after 2 retries" in r.error
    assert r.reconnects == 2 and r.sessions == 0


def test_cancel_stops_the_transfer_and_a_later_send_resumes(server):
    src = BallastSource(64 * MiB, seed=13)
    cancel = threading.Event()

    def progress(done, size):
        if done > 0:
            cancel.set()

    r1 = _send(server.port, src, "cancel", cancel=cancel, on_progress=progress)
    assert r1.status == "cancelled" and "cancel" in r1.error
    assert r1.bytes_sent_total < src.size_bytes
    r2 = _send(server.port, src, "cancel")
    assert r2.status == "completed", r2.error
    assert r2.resume_points[0] >= 1


def test_restarted_server_resumes_from_the_part_file(store, tmp_path):
    ckpt = tmp_path / "model.pt"
    ckpt.write_bytes(os.urandom(8 * MiB + 1000))
    with TransferServer("127.0.0.1", token=TOKEN, storage_dir=store, fsync=False) as srv1:
        with CutProxy(srv1.port, cut_after_bytes=4 * MiB, down_after_cut=True) as proxy:
            r1 = _send(proxy.port, FileSource(ckpt), "restart", max_retries=0)
    assert r1.status == "failed"
    assert (store / "restart.part").exists() and (store / "restart.part.sha256s").exists()
    with TransferServer("127.0.0.1", token=TOKEN, storage_dir=store, fsync=False) as srv2:
        r2 = _send(srv2.port, FileSource(ckpt), "restart")
    assert r2.status == "completed", r2.error
    assert r2.resume_points[0] > 0
    assert (store / "restart").read_bytes() == ckpt.read_bytes()


def test_a_different_object_under_the_same_id_starts_over(server, store, tmp_path):
    with CutProxy(server.port, cut_after_bytes=2 * MiB, down_after_cut=True) as proxy:
        assert _send(proxy.port, BallastSource(8 * MiB, seed=1), "reuse", max_retries=0).status == "failed"
    r = _send(server.port, BallastSource(8 * MiB, seed=2), "reuse")
    assert r.status == "completed" and r.resume_points == [0]
