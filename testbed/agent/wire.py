"""The control plane's wire format: an authentication handshake, then length-prefixed frames.

An unauthenticated peer can make the agent hold at most a few dozen bytes and no thread, and
nothing it sends is parsed as JSON:

1. on accept the agent sends a challenge, ``MAGIC`` + a random ``NONCE_BYTES`` nonce;
2. the client answers with ``MAC_BYTES`` bytes, ``HMAC-SHA256(token, CONTEXT + nonce)`` (the token
   itself never crosses the network); the agent compares them with :func:`hmac.compare_digest`
   (the handshake is :class:`testbed.netguard.challenge.Challenge`, shared with the transfer server);
3. the agent acknowledges with one frame (``{"ok": true, ...}``, or an error, then it closes).

After that both sides exchange frames: a 4-byte big-endian body length, then a JSON body. The
agent refuses a request frame longer than ``MAX_REQUEST_BYTES`` and JSON nested deeper than
``MAX_JSON_DEPTH`` (checked by a flat scan before the JSON is decoded).
"""

from __future__ import annotations

import socket
import struct

from testbed.netguard.challenge import MAC_BYTES, NONCE_BYTES, Challenge
from testbed.netguard.jsondepth import json_depth_exceeds

__all__ = ["CHALLENGE", "CHALLENGE_BYTES", "MAC_BYTES", "MAX_JSON_DEPTH", "NONCE_BYTES", "FrameTooLarge", "WireError",
           "auth_mac", "auth_ok", "frame", "json_depth_exceeds", "new_challenge", "parse_challenge", "read_frame",
           "recv_exact"]

MAGIC = b"TBA2"
CONTEXT = b"testbed-agent-control-v2:"
CHALLENGE = Challenge(MAGIC, CONTEXT)
CHALLENGE_BYTES = CHALLENGE.size
LENGTH = struct.Struct(">I")
MAX_REQUEST_BYTES = 1 << 20  # what the agent reads from an authenticated controller
MAX_RESPONSE_BYTES = 64 << 20  # what the controller reads from its agent (loss curves can be long)
MAX_JSON_DEPTH = 32  # what the agent accepts in a request


class WireError(Exception):
    """The peer broke the wire format, closed the connection, or went silent."""


def new_challenge() -> tuple[bytes, bytes]:
    """``(nonce, challenge bytes to send)``."""
    return CHALLENGE.new()


def parse_challenge(data: bytes) -> bytes:
    """The nonce in a challenge; WireError if it is not a testbed agent's challenge."""
    nonce = CHALLENGE.nonce_of(data)
    if nonce is None:
        raise WireError("the peer is not a testbed agent (protocol mismatch)")
    return nonce


def auth_mac(token: str, nonce: bytes) -> bytes:
    return CHALLENGE.mac(token, nonce)


def auth_ok(token: str, nonce: bytes, mac: bytes) -> bool:
    """Constant-time check of a client's answer to ``nonce``."""
    return CHALLENGE.ok(token, nonce, mac)


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
