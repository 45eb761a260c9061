"""Do things inside a named network namespace: sockets (per thread) and processes.

:data:`HOST` (the empty name) is this process's own namespace: nothing is entered (the local
substrate's node agent runs as a plain process, where namespaces cannot be made)."""

from __future__ import annotations

import ctypes
import os
from contextlib import contextmanager
from collections.abc import Iterator

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)
HOST = ""


def _setns(fd: int) -> None:
    """setns(2) on the calling thread (os.setns exists only from Python 3.12)."""
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def ns_path(name: str) -> str:
    """A named namespace (``/var/run/netns/NAME``) or a path such as ``/proc/PID/ns/net``
    (a Mininet host or a container: the Containernet way, by PID)."""
    return name if name.startswith("/") else f"/var/run/netns/{name}"


@contextmanager
def in_netns(name: str) -> Iterator[None]:
    """Switch *this thread* into namespace ``name`` (a name or a path) for the block, then back.

    Sockets created inside stay in that namespace for their whole life, so one process can
    hold sockets in many site namespaces (setns(2) acts on the calling thread only)."""
    if name == HOST:
        yield
        return
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        _enter(name)
        try:
            yield
        finally:
            _setns(home)
    finally:
        os.close(home)


def socket_factory(name: str):
    """``(family, type) -> socket`` creating each socket inside namespace ``name`` (for the transfer
    service, agent clients and benchmarks, which take a ``socket_factory``)."""
    import socket

    def make(family: int = socket.AF_INET, type: int = socket.SOCK_STREAM) -> socket.socket:  # noqa: A002
        with in_netns(name):
            return socket.socket(family, type)

    return make


@contextmanager
def ipr_in(name: str):
    """A pyroute2 ``IPRoute`` bound to namespace ``name`` (its netlink socket is created there).

    Used instead of ``pyroute2.NetNS``, which in 0.9.7 leaks a socketpair per instance."""
    from pyroute2 import IPRoute

    with in_netns(name):
        ipr = IPRoute()
    try:
        yield ipr
    finally:
        ipr.close()


def enter_netns(name: str) -> None:
    """Move the calling thread (in a single-threaded process: the process) into namespace ``name``
    for good (a name or a path, as for :func:`ns_path`); :data:`HOST`: stays where it is."""
    if name == HOST:
        return
    fd = os.open(ns_path(name), os.O_RDONLY)
    try:
        _setns(fd)
    finally:
        os.close(fd)


_enter = enter_netns


def spawn(name: str, argv: list[str], **popen_kw) -> "subprocess.Popen":  # noqa: F821
    """Start ``argv`` inside namespace ``name`` (no shell, no ``ip netns exec``). The caller owns
    the process: keep its PID, end it by PID."""
    import subprocess

    if name == HOST:
        return subprocess.Popen(argv, **popen_kw)
    return subprocess.Popen(argv, preexec_fn=lambda: _enter(name), **popen_kw)  # noqa: PLW1509


def terminate(procs, timeout_s: float = 5.0):
    """End processes we started (``subprocess.Popen`` children, or ``psutil.Process`` objects of our
    children), by PID, never by name: SIGTERM all,
    wait for all of them together up to ``timeout_s``, SIGKILL what is left, reap every one.
    Returns a :class:`testbed.processes.StopReport`."""
    from testbed.processes import stop_popens

    return stop_popens(list(procs), timeout_s=timeout_s)
