"""How many compiled relay processes serve a fabric's relayed links, and which links each serves (pure).

One compiled relay (:mod:`testbed.netem.relay.fastrelay`) serves any number of links from one epoll loop,
so a fabric needs no more relay processes than it has cores: by default one per CPU this process
may run on (``os.sched_getaffinity``), never more than there are links. ``TESTBED_RELAY_PROCS=N``
sets the number (``1``: every link in one process).

Links are spread so that the processes carry about the same configured rate (largest first, each
to the process with the least so far; ties by link order), so two fast links do not share a core
while another core serves only slow ones. Deterministic: same links, same groups.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

RELAY_PROCS_ENV = "TESTBED_RELAY_PROCS"
RELAY_RT_PRIO_ENV = "TESTBED_RELAY_RT_PRIO"
# SCHED_FIFO priority of the compiled relays: the lowest real-time one, ahead of every normal process
# (as the kernel's own forwarding is), behind any real-time task the machine already runs
DEFAULT_RT_PRIO = 1


class RelayPoolError(ValueError):
    """``TESTBED_RELAY_PROCS`` is not a whole number >= 1, or ``TESTBED_RELAY_RT_PRIO`` not one in 0-99."""


def cpu_count() -> int:
    """CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def process_count(n_links: int, env: dict | None = None) -> int:
    """Relay processes for ``n_links`` relayed links: ``TESTBED_RELAY_PROCS`` if set, else one per CPU;
    at most one per link, none without links."""
    if n_links <= 0:
        return 0
    env = os.environ if env is None else env
    raw = env.get(RELAY_PROCS_ENV, "").strip()
    if raw:
        try:
            n = int(raw)
        except ValueError:
            n = 0
        if n < 1:
            raise RelayPoolError(f"{RELAY_PROCS_ENV} must be a whole number >= 1, got {raw!r}")
    else:
        n = cpu_count()
    return min(n, n_links)


def rt_priority(env: dict | None = None) -> int:
    """The SCHED_FIFO priority the compiled relays ask for: ``TESTBED_RELAY_RT_PRIO`` if set (0: normal
    scheduling), else :data:`DEFAULT_RT_PRIO`. A relay not granted it runs at normal priority."""
    env = os.environ if env is None else env
    raw = env.get(RELAY_RT_PRIO_ENV, "").strip()
    if not raw:
        return DEFAULT_RT_PRIO
    try:
        prio = int(raw)
    except ValueError:
        prio = -1
    if not 0 <= prio <= 99:
        raise RelayPoolError(f"{RELAY_RT_PRIO_ENV} must be a whole number 0-99, got {raw!r}")
    return prio


def group_links(rates_mbit: Sequence[float], n_procs: int) -> list[list[int]]:
    """Indices into ``rates_mbit`` (one entry per link: its configured rate) split into ``n_procs``
    non-empty groups of about equal summed rate; each group lists its links in their original order."""
    n = len(rates_mbit)
    if n == 0:
        return []
    if not 1 <= n_procs <= n:
        raise ValueError(f"group_links: n_procs must be in [1, {n}], got {n_procs}")
    load = [0.0] * n_procs
    groups: list[list[int]] = [[] for _ in range(n_procs)]
    for i in sorted(range(n), key=lambda k: (-float(rates_mbit[k]), k)):
        g = min(range(n_procs), key=lambda j: (load[j], len(groups[j]), j))
        groups[g].append(i)
        load[g] += float(rates_mbit[i])
    return [sorted(g) for g in groups]
