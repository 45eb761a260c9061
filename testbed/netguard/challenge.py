"""An HMAC challenge/response handshake, parameterised per protocol (magic and MAC context).

1. on accept the server sends ``magic`` + a random ``NONCE_BYTES`` nonce;
2. the client answers with ``MAC_BYTES`` bytes, ``HMAC-SHA256(token, context + nonce)`` (the token
   itself never crosses the network); the server compares them with :func:`hmac.compare_digest`.

Distinct contexts keep one protocol's answers useless for another.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

NONCE_BYTES = 16
MAC_BYTES = 32


@dataclass(frozen=True)
class Challenge:
    magic: bytes
    context: bytes

    @property
    def size(self) -> int:
        """Bytes of one challenge on the wire."""
        return len(self.magic) + NONCE_BYTES

    def new(self) -> tuple[bytes, bytes]:
        """``(nonce, challenge bytes to send)``."""
        nonce = secrets.token_bytes(NONCE_BYTES)
        return nonce, self.magic + nonce

    def nonce_of(self, data: bytes) -> bytes | None:
        """The nonce in a received challenge, or None when ``data`` is not this protocol's challenge."""
        if len(data) != self.size or not data.startswith(self.magic):
            return None
        return data[len(self.magic):]

    def mac(self, token: str | bytes, nonce: bytes) -> bytes:
        key = token.encode() if isinstance(token, str) else token
        return hmac.new(key, self.context + nonce, hashlib.sha256).digest()

    def ok(self, token: str | bytes, nonce: bytes, mac: bytes) -> bool:
        """Constant-time check of a client's answer to ``nonce``."""
        return len(mac) == MAC_BYTES and hmac.compare_digest(self.mac(token, nonce), mac)
