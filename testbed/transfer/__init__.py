"""Checkpoint transfer service: real TCP bulk transfer between sites, chunked, SHA-256 verified, resumable.

Modules, one concept each:

- :mod:`~testbed.transfer.source` -- what is sent: ``FileSource``, ``BallastSource`` (deterministic
  pseudo-random bytes standing in for paper-scale checkpoints), ``ConcatSource`` (a real checkpoint
  followed by ballast), each with a lazily computed SHA-256 ``Manifest``.
- :mod:`~testbed.transfer.protocol` -- the wire format (HELLO / REPLY / CHUNK / ACK / NAK / FINAL).
- :mod:`~testbed.transfer.sink` -- where verified bytes go on the server (``.part`` + atomic rename,
  or discard); :mod:`~testbed.transfer.state` -- per-transfer resume state;
  :mod:`~testbed.transfer.commit` -- sink write + whole-object hash pipelined in a second thread.
- :mod:`~testbed.transfer.server` -- ``TransferServer``; :mod:`~testbed.transfer.client` -- ``send``
  (with :mod:`~testbed.transfer.session`, one connection's streaming) and ``Channel`` (a connection
  kept between sends, where the server keeps them: ``keep_open_s``).
- :mod:`~testbed.transfer.report` -- ``TransferReport`` (client) and ``TransferResult`` (server).

Design choices:

- Chunks (default 4 MiB) are streamed back to back; the server verifies each chunk's SHA-256 on
  arrival and answers ACK or NAK; the client resends a NAKed chunk at once (selective repeat: the
  server holds chunks verified after a gap in memory, bounded by the client's ``window_bytes``).
- The whole-object SHA-256 is the plain SHA-256 of the bytes (what ``sha256sum`` prints); the
  client declares it in HELLO from its manifest, the server computes it incrementally over the
  verified prefix and checks it before FINAL OK. A final file exists only for a verified object.
- Resume: the server's state per ``transfer_id`` (verified prefix, running hash) survives
  disconnects; HELLO's reply says where to resume. A HELLO for the same id but another object
  (size, chunking, digests, stored bytes) starts over. A new connection takes a transfer over from
  a stale one (after a silent outage the old socket may still look alive to the server).
- ``store_bytes``: the server keeps only the leading ``store_bytes`` on disk (a real checkpoint),
  the rest (ballast) is verified and discarded. Fully stored objects have an on-disk digest
  sidecar, so a restarted server resumes them from the ``.part`` file.
- Hostile peers (the server listens on every site's WAN address): a connection answers an HMAC
  challenge with the per-run token before anything it sends is parsed, and unauthenticated
  connections are capped, timed out and cost no thread (:mod:`testbed.netguard`, shared with the
  agent's control server); HELLOs, chunk frames and resends are bounded; ``announce`` bounds a
  transfer by what the controller expects.
- ``socket_factory(family, type)`` creates every socket (listening and client), e.g. inside a
  network namespace with ``testbed.netem.nsexec.in_netns``.
- Timeouts: a connection on which nothing moves for ``io_timeout_s`` is treated as cut (the server
  sends a PROGRESS keepalive twice a second while receiving, so slow links do not look dead).
- Fault injection only through explicit parameters (``send(corrupt_chunks=...)``); no global state.
"""

from testbed.transfer.client import DEFAULT_CHUNK_BYTES, Channel, send
from testbed.transfer.errors import TransferError
from testbed.transfer.report import TransferReport, TransferResult
from testbed.transfer.server import TransferServer
from testbed.transfer.source import BallastSource, ConcatSource, FileSource, Manifest, Source

__all__ = [
    "DEFAULT_CHUNK_BYTES", "BallastSource", "Channel", "ConcatSource", "FileSource", "Manifest", "Source", "TransferError",
    "TransferReport", "TransferResult", "TransferServer", "send",
]
