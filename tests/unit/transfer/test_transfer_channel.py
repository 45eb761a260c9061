"""A client's connection kept between sends (``send(channel=...)``) where the server keeps connections
(``keep_open_s``): the second send needs no connect and no challenge; a server that does not keep them,
or closed one that idled too long, gets a new connection; a stopping server ends its idle ones."""

from __future__ import annotations

import time

import pytest

from testbed.transfer import BallastSource, Channel, send

TOKEN = "k33p"


def _send(srv, ch, tid: str, size: int = 300_000):
    src = BallastSource(size, seed=len(tid))
    rep = send("127.0.0.1", srv.port, src, transfer_id=tid, token=TOKEN, chunk_bytes=64 << 10, channel=ch)
    assert rep.ok and rep.status == "completed", rep.error
    assert rep.sha256 == src.manifest(64 << 10).sha256
    return rep


def test_a_kept_connection_carries_the_next_transfer_without_a_handshake(start_server):
    srv = start_server(keep_open_s=30.0)
    with Channel() as ch:
        first = _send(srv, ch, "one")
        assert ch.sock is not None and ch.reused == 0
        second = _send(srv, ch, "two")
        third = _send(srv, ch, "three", size=1)
        assert ch.reused == 2 and first.reconnects == second.reconnects == third.reconnects == 0
    assert [r.transfer_id for r in srv.results()] == ["one", "two", "three"]
    assert all(r.ok for r in srv.results())


def test_a_server_that_does_not_keep_connections_gets_a_new_one_each_time(start_server):
    srv = start_server()  # keep_open_s 0: closes after FINAL
    with Channel() as ch:
        _send(srv, ch, "one")
        _send(srv, ch, "two")
        assert ch.reused == 0  # the kept socket was found closed: connected anew, not counted as a retry
    assert len(srv.results()) == 2


def test_an_idle_connection_is_closed_after_keep_open_s_and_the_next_send_reconnects(start_server):
    srv = start_server(keep_open_s=0.3)
    with Channel() as ch:
        _send(srv, ch, "one")
        time.sleep(0.8)
        rep = _send(srv, ch, "two")
        assert ch.reused == 0 and rep.reconnects == 0


def test_stop_ends_a_kept_idle_connection_at_once(start_server):
    srv = start_server(keep_open_s=600.0)
    ch = Channel()
    _send(srv, ch, "one")
    t0 = time.monotonic()
    srv.stop()
    assert time.monotonic() - t0 < 5.0
    ch.close()


def test_keep_open_s_must_not_be_negative(start_server):
    with pytest.raises(ValueError, match="keep_open_s"):
        start_server(keep_open_s=-1)
