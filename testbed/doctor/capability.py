"""What one probe found (:class:`Capability`), and the per-probe deadline."""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, Iterator


@dataclass(frozen=True)
class Capability:
    """One thing this machine can (``available``) or cannot do.

    ``detail`` says what was probed and what was seen; ``consequence`` what it means for a
    scenario; ``measured`` holds machine-readable facts (versions, timings, read-back values).
    A probe that was not run (no root, or ``need_root_probes=False``) has ``available=False``
    and ``measured["probed"] is False``."""

    name: str
    available: bool
    detail: str
    consequence: str
    measured: dict[str, Any] = field(default_factory=dict)

    @property
    def probed(self) -> bool:
        return bool(self.measured.get("probed", True))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class ProbeTimeout(Exception):
    """A probe ran past its deadline."""


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Raise :class:`ProbeTimeout` in the block after ``seconds`` (SIGALRM, so the probe's own
    ``finally`` clauses still run and remove what it made).

    Only in the main thread and when no other interval timer is armed; elsewhere the block runs
    without one (probes that start processes also pass their own ``timeout=``)."""
    usable = threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
    if not usable or signal.getitimer(signal.ITIMER_REAL)[0] > 0:
        yield
        return

    def _expire(signum, frame):
        raise ProbeTimeout(f"timed out after {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, _expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
