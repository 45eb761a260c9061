"""HELLO validation: every field is checked and errors name it."""

from __future__ import annotations

import json

import pytest

from testbed.transfer.errors import ProtocolError
from testbed.transfer.protocol import LEN, MAGIC, Hello

SHA = "ab" * 32


def _hello(**kw) -> Hello:
    d = dict(transfer_id="job-1.ckpt", size_bytes=10_000, chunk_bytes=4096, n_chunks=3, sha256=SHA,
             chunks_sha256=SHA, store_bytes=0)
    d.update(kw)
    return Hello(**d)


def test_hello_round_trips():
    h = _hello()
    raw = h.encode()
    assert raw.startswith(MAGIC)
    (n,) = LEN.unpack(raw[4:8])
    assert Hello.from_dict(json.loads(raw[8:8 + n])) == h


@pytest.mark.parametrize("field, value", [
    ("transfer_id", "../etc/passwd"), ("transfer_id", ""), ("chunk_bytes", 100), ("n_chunks", 4),
    ("store_bytes", 10_001), ("sha256", "xyz"), ("size_bytes", -1),
])
def test_invalid_hello_fields_are_named(field, value):
    with pytest.raises(ProtocolError, match=f"hello.{field}"):
        _hello(**{field: value}).validate()


def test_wrong_version_and_types_are_refused():
    d = json.loads(_hello().encode()[8:])
    with pytest.raises(ProtocolError, match="hello.version"):
        Hello.from_dict({**d, "version": 1})  # version 1 sent the token in clear
    with pytest.raises(ProtocolError, match="hello.size_bytes"):
        Hello.from_dict({**d, "size_bytes": "10"})
    with pytest.raises(ProtocolError, match="hello.store_bytes"):
        Hello.from_dict({**d, "store_bytes": True})
