"""What a transfer achieved: the client's :class:`TransferReport`, the server's :class:`TransferResult`.

All ``t_*`` are seconds; ``phases`` holds ``(name, t_start, t_end)`` on the ``time.monotonic()``
clock of the sending process, in order: ``manifest`` (hashing the source, skipped when cached),
then per connection ``connect`` (TCP + HELLO) and ``transfer`` (first payload byte to the last ack
or the cut), ``backoff`` between connections, and ``verify`` (last ack to the server's FINAL).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

Status = Literal["completed", "failed", "cancelled"]


@dataclass
class TransferReport:
    """Client-side account of one :func:`testbed.transfer.client.send` call.

    ``t_transfer_s`` runs from the first payload byte of this call to the last chunk ack, so it
    includes any outage and reconnection in between (what a migration experiences); the per-connection
    ``transfer`` phases give the link-only times. ``goodput_mbps`` counts only the bytes this call had
    to move: ``(size_bytes - resumed_bytes) * 8 / t_transfer_s / 1e6`` (``resumed_bytes`` is what the
    server already held at this call's first HELLO; 0 for a fresh transfer). ``resume_points`` is the
    server's resume point (in chunks) at each accepted HELLO; ``reconnects`` counts connection attempts
    after a failed one, ``sessions`` the accepted HELLOs.
    """

    transfer_id: str
    status: Status = "failed"
    size_bytes: int = 0
    chunk_bytes: int = 0
    chunks: int = 0
    bytes_sent_total: int = 0
    resumed_bytes: int = 0
    chunk_resends: int = 0
    reconnects: int = 0
    sessions: int = 0
    resume_points: list[int] = field(default_factory=list)
    sha256: str = ""
    t_manifest_s: float = 0.0
    t_connect_s: float = 0.0
    t_transfer_s: float = 0.0
    t_verify_s: float = 0.0
    t_total_s: float = 0.0
    goodput_mbps: float = 0.0
    started_at_monotonic: float = 0.0
    phases: list[tuple[str, float, float]] = field(default_factory=list)
    server_path: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "completed"

    def to_dict(self) -> dict:
        d = asdict(self)
        d["phases"] = [list(p) for p in self.phases]
        return d

    def summary(self) -> str:
        """One human line (the CLI prints it)."""
        line = (f"{self.transfer_id}: {self.status} {self.size_bytes} B in {self.t_total_s:.3f} s "
                f"(transfer {self.t_transfer_s:.3f} s, {self.goodput_mbps:.1f} Mbit/s goodput, "
                f"{self.reconnects} reconnects, {self.chunk_resends} chunk resends)")
        return line + (f": {self.error}" if self.error else "")


@dataclass(frozen=True)
class TransferResult:
    """Server-side record of one transfer that reached its end (verified or not)."""

    transfer_id: str
    ok: bool
    size_bytes: int
    stored_bytes: int
    sha256: str
    path: Path | None
    verify_s: float
    error: str | None = None

    def to_dict(self) -> dict:
        d = asdict(self)
        d["path"] = None if self.path is None else str(self.path)
        return d
