"""The transfer tests' fixtures: a storage folder, and transfer servers on loopback (defined once here)."""

from __future__ import annotations

import pytest

from testbed.transfer import TransferServer


@pytest.fixture
def store(tmp_path):
    """An empty folder for a server's verified objects (``<tmp_path>/store``)."""
    d = tmp_path / "store"
    d.mkdir()
    return d


@pytest.fixture
def start_server(request, store):
    """Starts transfer servers on 127.0.0.1 (a free port each) with the test module's ``TOKEN``, storing
    into ``store`` unless ``storage_dir`` is given, without fsync; other keywords go to
    :class:`TransferServer`. After the test each is stopped, and the test fails if a connection
    handler of one raised (:meth:`TransferServer.errors`)."""
    token = request.module.TOKEN
    made: list[TransferServer] = []

    def start(**kw) -> TransferServer:
        kw.setdefault("storage_dir", store)
        srv = TransferServer("127.0.0.1", token=token, fsync=False, **kw).start()
        made.append(srv)
        return srv

    yield start
    for srv in made:
        srv.stop()
        assert srv.errors() == []


@pytest.fixture
def server(start_server) -> TransferServer:
    """One transfer server, started as :func:`start_server` starts them."""
    return start_server()
