"""Wire format (version 2). All integers are big-endian.

Authentication comes first, before the server parses anything a peer sends (the handshake and
the bounds on unauthenticated connections are :mod:`testbed.netguard`'s, shared with the agent's
control server)::

    server -> client   CHALLENGE  b"TBXC" | 16-byte random nonce
    client -> server   ANSWER     32 bytes: HMAC-SHA256(token, CONTEXT + nonce)  (the token never crosses)
    server -> client   u32 len | JSON {"ok": true, "authenticated": true}
                       u32 len | JSON {"ok": false, "error": "...", "transient": bool}  (then it closes)

Client -> server, once per connection, after that::

    HELLO   b"TBX2" | u32 len | JSON {version, transfer_id, size_bytes, chunk_bytes,
                                      n_chunks, sha256, chunks_sha256, store_bytes}

(at most ``MAX_HELLO_BYTES`` of flat JSON: a longer length or any nesting is refused unread).

Server -> client::

    REPLY   u32 len | JSON {"ok": true, "resume_from": k}   (k leading chunks already verified)
            u32 len | JSON {"ok": false, "error": "..."}     (then the server closes; nothing stored)

Client -> server, then, any number of::

    CHUNK   b"C" | u64 index | u32 length | 32-byte SHA-256 of the payload | payload

Server -> client, interleaved::

    b"A" | u64 index      chunk verified (and stored when inside store_bytes)
    b"N" | u64 index      chunk failed verification: resend it
    b"P" | u64 bytes      progress keepalive (bytes received on this connection), <= 2 per second
    b"F" | u64 len | JSON {"ok": bool, "sha256": hex, "path": str|null, "verify_s": s, "error": ...}

``F`` is sent once every chunk is verified in order (whole-object SHA-256 checked), and also right
after REPLY when the server already holds (or has completed) the whole object.
"""

from __future__ import annotations

import json
import re
import socket
import struct
from dataclasses import asdict, dataclass

from testbed.netguard.challenge import Challenge
from testbed.netguard.jsondepth import json_depth_exceeds
from testbed.transfer.errors import ProtocolError

VERSION = 2
MAGIC = b"TBX2"
CHALLENGE = Challenge(b"TBXC", b"testbed-transfer-v2:")
LEN = struct.Struct("!I")
CHUNK_HEADER = struct.Struct("!cQI32s")
SERVER_MSG = struct.Struct("!cQ")
MSG_CHUNK, MSG_ACK, MSG_NAK, MSG_PROGRESS, MSG_FINAL = b"C", b"A", b"N", b"P", b"F"
MAX_JSON_BYTES = 64 * 1024
MAX_HELLO_BYTES = 4 * 1024  # a HELLO is ~400 bytes of flat JSON
MIN_CHUNK_BYTES = 4 * 1024
MAX_CHUNK_BYTES = 256 * 1024 * 1024
TRANSFER_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class Hello:
    transfer_id: str
    size_bytes: int
    chunk_bytes: int
    n_chunks: int
    sha256: str
    chunks_sha256: str
    store_bytes: int
    version: int = VERSION

    def encode(self) -> bytes:
        body = json.dumps(asdict(self), separators=(",", ":")).encode()
        return MAGIC + LEN.pack(len(body)) + body

    def identity(self) -> tuple:
        """What must match for a reconnecting client to resume the server's partial state."""
        return (self.size_bytes, self.chunk_bytes, self.sha256, self.chunks_sha256, self.store_bytes)

    @classmethod
    def from_dict(cls, d: object) -> "Hello":
        if not isinstance(d, dict):
            raise ProtocolError("hello: not a JSON object")
        if d.get("version") != VERSION:
            raise ProtocolError(f"hello.version: expected {VERSION}, got {d.get('version')!r}")
        fields = {}
        for name, kind in (("transfer_id", str), ("sha256", str), ("chunks_sha256", str),
                           ("size_bytes", int), ("chunk_bytes", int), ("n_chunks", int), ("store_bytes", int)):
            v = d.get(name)
            if not isinstance(v, kind) or isinstance(v, bool):
                raise ProtocolError(f"hello.{name}: expected {kind.__name__}, got {v!r}")
            fields[name] = v
        h = cls(**fields)
        h.validate()
        return h

    def validate(self) -> None:
        if not TRANSFER_ID_RE.match(self.transfer_id):
            raise ProtocolError(f"hello.transfer_id: must match {TRANSFER_ID_RE.pattern}, got {self.transfer_id!r}")
        if not MIN_CHUNK_BYTES <= self.chunk_bytes <= MAX_CHUNK_BYTES:
            raise ProtocolError(f"hello.chunk_bytes: must be in [{MIN_CHUNK_BYTES}, {MAX_CHUNK_BYTES}], "
                                f"got {self.chunk_bytes}")
        if self.size_bytes < 0:
            raise ProtocolError(f"hello.size_bytes: must be >= 0, got {self.size_bytes}")
        if self.n_chunks != -(-self.size_bytes // self.chunk_bytes):
            raise ProtocolError(f"hello.n_chunks: {self.n_chunks} does not match size_bytes/chunk_bytes")
        if not 0 <= self.store_bytes <= self.size_bytes:
            raise ProtocolError(f"hello.store_bytes: must be in [0, size_bytes], got {self.store_bytes}")
        for name in ("sha256", "chunks_sha256"):
            if not _HEX64.match(getattr(self, name)):
                raise ProtocolError(f"hello.{name}: expected 64 lower-case hex digits")

    def chunk_len(self, index: int) -> int:
        return min(self.chunk_bytes, self.size_bytes - index * self.chunk_bytes)


def recv_exact(sock: socket.socket, n: int) -> bytes:
    """``n`` bytes or ``ConnectionError`` (peer closed); socket timeouts propagate."""
    buf = bytearray(n)
    recv_into_exact(sock, memoryview(buf))
    return bytes(buf)


def recv_into_exact(sock: socket.socket, view: memoryview) -> None:
    got = 0
    while got < len(view):
        k = sock.recv_into(view[got:])
        if k == 0:
            raise ConnectionError(f"peer closed the connection after {got} of {len(view)} bytes")
        got += k


def recv_json(sock: socket.socket, what: str, max_bytes: int = MAX_JSON_BYTES) -> object:
    """One ``u32 len | JSON`` message; a length over ``max_bytes`` is refused before anything is read."""
    (n,) = LEN.unpack(recv_exact(sock, LEN.size))
    return decode_json(recv_exact(sock, checked_json_len(n, what, max_bytes)), what)


def read_hello(sock: socket.socket) -> Hello:
    """The HELLO of an authenticated client: magic, then at most ``MAX_HELLO_BYTES`` of flat JSON."""
    magic = recv_exact(sock, len(MAGIC))
    if magic != MAGIC:
        raise ProtocolError(f"hello: bad magic {magic!r} (not a testbed transfer client of version {VERSION}?)")
    (n,) = LEN.unpack(recv_exact(sock, LEN.size))
    raw = recv_exact(sock, checked_json_len(n, "hello", MAX_HELLO_BYTES))
    if json_depth_exceeds(raw, 1):
        raise ProtocolError("hello: nested JSON (a HELLO is one flat object)")
    return Hello.from_dict(decode_json(raw, "hello"))


def encode_refusal(message: str, *, transient: bool = False) -> bytes:
    """The server's answer to a connection it will not serve (then it closes)."""
    return encode_json_msg({"ok": False, "error": message, "transient": transient})


def encode_json_msg(obj: dict) -> bytes:
    body = json.dumps(obj, separators=(",", ":")).encode()
    return LEN.pack(len(body)) + body


def encode_final(obj: dict) -> bytes:
    body = json.dumps(obj, separators=(",", ":")).encode()
    return SERVER_MSG.pack(MSG_FINAL, len(body)) + body


def decode_json(raw: bytes, what: str) -> object:
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError, JSONDecodeError, too many digits
        raise ProtocolError(f"{what}: invalid JSON ({e})") from e


def checked_json_len(n: int, what: str, max_bytes: int = MAX_JSON_BYTES) -> int:
    if n > max_bytes:
        raise ProtocolError(f"{what}: JSON of {n} bytes exceeds {max_bytes}")
    return n


AUTH_OK = encode_json_msg({"ok": True, "authenticated": True})  # the server's answer to a correct response
