"""Run-time probes of what this kernel can do (thin wrappers over ``testbed doctor``'s probes)."""

from __future__ import annotations

import functools


@functools.lru_cache(maxsize=None)
def qdisc_available(kind: str) -> bool:
    """True if a ``kind`` qdisc can really be added here (probed once per process; needs root)."""
    from testbed.doctor import probe

    return probe(f"qdisc_{kind}").available
