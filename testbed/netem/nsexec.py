"""Do things inside a named network namespace: sockets (per thread) and processes."""

from __future__ import annotations

import os
import subprocess
import threading
from contextlib import contextmanager
from typing import Iterator

_lock = threading.Lock()


@contextmanager
def in_netns(name: str) -> Iterator[None]:
    """Switch *this thread* into namespace ``name`` for the block, then back.

    Sockets created inside stay in that namespace for their whole life, so one process can
    hold sockets in many site namespaces (setns(2) acts on the calling thread only)."""
    from pyroute2 import netns

    netns.pushns(name)
    try:
        yield
    finally:
        netns.popns()


def _enter(name: str) -> None:
    fd = os.open(f"/var/run/netns/{name}", os.O_RDONLY)
    try:
        os.setns(fd, os.CLONE_NEWNET)
    finally:
        os.close(fd)


def spawn(name: str, argv: list[str], **popen_kw) -> subprocess.Popen:
    """Start ``argv`` inside namespace ``name`` (no shell, no ``ip netns exec``). The caller owns
    the process: keep its PID, end it by PID."""
    return subprocess.Popen(argv, preexec_fn=lambda: _enter(name), **popen_kw)  # noqa: PLW1509
