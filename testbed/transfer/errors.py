"""Typed errors of the transfer service.

``TransientError`` subclasses mean "the link misbehaved, reconnect and resume"; every other
``TransferError`` is permanent for the transfer at hand (retrying cannot help).
"""

from __future__ import annotations

from testbed.errors import TestbedError


class TransferError(TestbedError):
    """Base class of every error the transfer service raises on purpose."""


class SourceChangedError(TransferError):
    """A source's bytes no longer match what it declared (a file shrank, grew or was rewritten)."""


class ProtocolError(TransferError):
    """The peer sent something that is not valid protocol: wrong magic, bad field, bad frame."""


class RefusedError(TransferError):
    """The server refused the transfer (bad token, no storage, invalid HELLO). Not retried."""


class VerificationError(TransferError):
    """The object (or one chunk, repeatedly) failed SHA-256 verification. Never reported as success."""


class TransientError(TransferError):
    """The link stalled or dropped: the client reconnects and resumes."""


class DeadlineExceeded(TransferError):
    """The caller's deadline passed before the transfer completed."""


class Cancelled(TransferError):
    """The caller's cancel event was set."""
