"""Raising a server process's open-file soft limit (a flood then hits the server's own caps first)."""

from __future__ import annotations

import logging
import resource

log = logging.getLogger(__name__)


def raise_fd_limit() -> tuple[int, int]:
    """Raise this process's RLIMIT_NOFILE soft limit to its hard limit; returns ``(soft, hard)``."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard
    if hard == resource.RLIM_INFINITY:
        try:
            with open("/proc/sys/fs/nr_open") as f:
                target = int(f.read())
        except (OSError, ValueError):
            return soft, hard
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (OSError, ValueError) as e:
            log.warning("could not raise RLIMIT_NOFILE from %d to %d: %s", soft, target, e)
    return soft, hard
