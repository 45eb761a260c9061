"""The control plane's wire format: an authentication handshake, then length-prefixed frames.

An unauthenticated peer can make the agent hold at most a few dozen bytes and no thread, and
nothing it sends is parsed as JSON:

1. on accept the agent sends a challenge, ``MAGIC`` + a random ``NONCE_BYTES`` nonce;
2. the client answers with ``MAC_BYTES`` bytes, ``HMAC-SHA256(token, CONTEXT + nonce)`` (the token
   itself never crosses the network); the agent compares them with :func:`hmac.compare_digest`;
3. the agent acknowledges with one frame (``{"ok": true, ...}``, or an error, then it closes).

After that both sides exchange frames: a 4-byte big-endian body length, then a JSON body. The
agent refuses a request frame longer than ``MAX_REQUEST_BYTES`` and JSON nested deeper than
``MAX_JSON_DEPTH`` (checked by a flat scan before the JSON is decoded).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import socket
import struct

MAGIC = b"TBA2"
NONCE_BYTES = 16
CHALLENGE_BYTES = len(MAGIC) + NONCE_BYTES
MAC_BYTES = 32
CONTEXT = b"testbed-agent-control-v2:"
LENGTH = struct.Struct(">I")
MAX_REQUEST_BYTES = 1 << 20  # what the agent reads from an authenticated controller
MAX_RESPONSE_BYTES = 64 << 20  # what the controller reads from its agent (loss curves can be long)
MAX_JSON_DEPTH = 32


class WireError(Exception):
    """The peer broke the wire format, closed the connection, or went silent."""


def new_challenge() -> tuple[bytes, bytes]:
    """``(nonce, challenge bytes to send)``."""
    nonce = secrets.token_bytes(NONCE_BYTES)
    return nonce, MAGIC + nonce


def parse_challenge(data: bytes) -> bytes:
    """The nonce in a challenge; WireError if it is not a testbed agent's challenge."""
    if len(data) != CHALLENGE_BYTES or not data.startswith(MAGIC):
        raise WireError("the peer is not a testbed agent (protocol mismatch)")
    return data[len(MAGIC):]


def auth_mac(token: str, nonce: bytes) -> bytes:
    return hmac.new(token.encode(), CONTEXT + nonce, hashlib.sha256).digest()


def auth_ok(token: str, nonce: bytes, mac: bytes) -> bool:
    """Constant-time check of a client's answer to ``nonce``."""
    return len(mac) == MAC_BYTES and hmac.compare_digest(auth_mac(token, nonce), mac)


def frame(body: bytes) -> bytes:
    return LENGTH.pack(len(body)) + body


def recv_exact(sock: socket.socket, n: int) -> bytes:
    """Exactly ``n`` bytes from a blocking socket; WireError if the peer closes first."""
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise WireError("connection closed by the peer" if not buf else "connection closed mid-message")
        buf += chunk
    return bytes(buf)


def read_frame(sock: socket.socket, max_bytes: int) -> bytes:
    """One frame's body. A frame longer than ``max_bytes`` raises :class:`FrameTooLarge` before
    any of its body is read."""
    (n,) = LENGTH.unpack(recv_exact(sock, LENGTH.size))
    if n > max_bytes:
        raise FrameTooLarge(n, max_bytes)
    return recv_exact(sock, n)


class FrameTooLarge(WireError):
    def __init__(self, n: int, limit: int):
        self.n, self.limit = n, limit
        super().__init__(f"message too large ({n} bytes, at most {limit})")


_SPECIAL = re.compile(rb'["\\\[\]{}]')


def json_depth_exceeds(data: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether JSON text ``data`` nests arrays/objects deeper than ``limit``: a flat scan of its
    brackets outside strings (no recursion, linear in the number of special characters; stops at
    the first level over the limit). Does not validate the JSON."""
    depth, in_str, skip = 0, False, -1
    for m in _SPECIAL.finditer(data):
        i = m.start()
        if i == skip:
            continue
        c = data[i]
        if in_str:
            if c == 0x5C:  # backslash: the next byte is escaped
                skip = i + 1
            elif c == 0x22:
                in_str = False
        elif c == 0x22:
            in_str = True
        elif c in (0x5B, 0x7B):
            depth += 1
            if depth > limit:
                return True
        elif c in (0x5D, 0x7D):
            depth -= 1
    return False
