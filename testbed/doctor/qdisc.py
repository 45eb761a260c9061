"""Run-time question to the probes: can a ``kind`` qdisc really be added here?

Substrates, ``testbed net`` and ``testbed bench`` ask it to pick netem or the delay relay.
"""

from __future__ import annotations

import functools


@functools.lru_cache(maxsize=None)
def qdisc_available(kind: str) -> bool:
    """True if a ``kind`` qdisc can really be added here (probed once per process; needs root)."""
    from testbed.doctor import probe

    return probe(f"qdisc_{kind}").available


def detect_impairment() -> str:
    """How latency, jitter and loss are emulated here: netem where the kernel has it, else the
    userspace delay relay (what ``--impairment auto`` means everywhere)."""
    return "netem" if qdisc_available("netem") else "relay"
