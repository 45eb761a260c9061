"""The path probe (``bandwidth_basis: probe``) over loopback, in this process's own namespace: it
measures what the path carries, and a path that carries nothing is a measurement (goodput 0 and why),
not an exception that ends the run."""

from __future__ import annotations

import socket

import pytest

from testbed.netem import probe
from testbed.netem.nsexec import HOST


def test_a_probe_over_loopback_measures_goodput_and_the_connect_time():
    got = probe.probe_path(HOST, HOST, "127.0.0.1", 0.5)
    assert got.error == ""
    assert got.goodput_bps > 1e8 and got.bytes_sent > 0  # loopback carries far more than 100 Mbit/s
    assert got.connect_s is not None and 0 <= got.connect_s < got.wall_s
    assert got.wall_s >= 0.5


class _Unanswered(socket.socket):
    """A client socket whose connection never opens, as when every SYN is lost."""

    def connect(self, address):
        raise TimeoutError("timed out")


class _Refused(socket.socket):
    def connect(self, address):
        raise ConnectionRefusedError(111, "Connection refused")


@pytest.mark.parametrize(("cls", "cause"), [(_Unanswered, "timed out"), (_Refused, "Connection refused")])
def test_a_connection_that_never_opens_is_a_dead_path_not_an_error(monkeypatch, cls, cause):
    made = []
    real = socket.socket

    def factory(*args, **kwargs):
        s = (cls if made else real)(*args, **kwargs)  # the listener is made first, then the client
        made.append(s)
        return s

    monkeypatch.setattr(probe.socket, "socket", factory)
    got = probe.probe_path(HOST, HOST, "127.0.0.1", 0.5)
    assert got.goodput_bps == 0.0 and got.bytes_sent == 0 and got.connect_s is None
    assert got.error.startswith("connect to 127.0.0.1 failed after") and got.error.endswith(f"({cause})")
    assert all(s.fileno() == -1 for s in made)  # the listener and the client are closed


def test_a_path_that_stalls_mid_probe_keeps_what_arrived(monkeypatch):
    class _Stalls(socket.socket):
        calls = 0

        def sendall(self, data, *args):
            type(self).calls += 1
            if type(self).calls > 3:
                raise TimeoutError("timed out")
            return super().sendall(data, *args)

    made = []
    real = socket.socket

    def factory(*a, **k):
        s = (_Stalls if made else real)(*a, **k)
        made.append(s)
        return s

    monkeypatch.setattr(probe.socket, "socket", factory)
    got = probe.probe_path(HOST, HOST, "127.0.0.1", 0.5)
    assert got.bytes_sent == 3 * probe.CHUNK and got.connect_s is not None
    assert got.error.startswith("sending stopped after")
    assert got.goodput_bps > 0  # the 3 MiB that arrived
