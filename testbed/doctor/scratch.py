"""Throwaway resources for probes, each removed on every exit path.

Namespaces are ``tb-<run>-doctor-<tag>``, interfaces ``tb<run><tag>a|b`` (made *inside* the
namespace, so removing the namespace removes them), cgroups ``tb-<run>-doctor``.
:func:`sweep` removes whatever a run id still owns after its probes (a probe cut short by its
deadline): it matches the exact run id, never a broad name.
"""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from testbed.netem.naming import if_name, ns_name, run_of_ns
from testbed.netem.nsexec import in_netns

NETNS_DIR = Path("/var/run/netns")


def doctor_ns(run_id: str, tag: str) -> str:
    return ns_name(run_id, f"doctor-{tag}")


def cgroup_name(run_id: str) -> str:
    return ns_name(run_id, "doctor")


CLONE_NEWNET = 0x40000000


def _libc_call(name: str, *args) -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if getattr(libc, name)(*args) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{name}: {os.strerror(err)}")


def _remove_netns(name: str) -> None:
    from pyroute2 import netns

    if name in netns.listnetns():
        netns.remove(name)


def _new_netns_thread(name: str, errors: list[BaseException]) -> threading.Thread:
    """A thread that unshares its own network namespace and bind-mounts it as ``name``.

    No fork (pyroute2's ``netns.create`` and ``NetNS`` fork a child, which then runs whatever
    Python-level SIGTERM handler the caller installed, and warns on Python >= 3.12 when threads
    exist); the thread ends, the mounted namespace stays."""
    from pyroute2 import netns

    def work() -> None:
        try:
            _libc_call("unshare", CLONE_NEWNET)
            netns.attach(name, f"self/task/{threading.get_native_id()}")
        except BaseException as e:  # handed to the caller
            errors.append(e)

    return threading.Thread(target=work, name=f"doctor-{name}", daemon=True)


@contextmanager
def scratch_netns(run_id: str, tag: str) -> Iterator[str]:
    """A fresh, empty network namespace; yields its name."""
    name = doctor_ns(run_id, tag)
    errors: list[BaseException] = []
    maker = _new_netns_thread(name, errors)
    try:
        maker.start()
        maker.join()
        if errors:
            raise errors[0]
        yield name
    finally:
        maker.join()  # a deadline may have cut the first join short: let it finish, then remove
        _remove_netns(name)


@dataclass
class ScratchVeth:
    netns: str
    ipr: Any  # pyroute2 IPRoute opened inside ``netns``
    index: int
    ifname: str
    peer: str


@contextmanager
def scratch_veth(run_id: str, tag: str) -> Iterator[ScratchVeth]:
    """A veth pair, both ends up, inside a fresh namespace; the block runs inside it too."""
    from pyroute2 import IPRoute

    with scratch_netns(run_id, tag) as ns, entered(ns), IPRoute() as ipr:
        a, b = if_name(run_id, f"{tag}a"), if_name(run_id, f"{tag}b")
        ipr.link("add", ifname=a, kind="veth", peer=b)
        for name in (a, b):
            ipr.link("set", index=ipr.link_lookup(ifname=name)[0], state="up")
        yield ScratchVeth(ns, ipr, ipr.link_lookup(ifname=a)[0], a, b)


def entered(ns: str):
    """Move *this thread* into namespace ``ns`` for the block, then back to this thread's own
    namespace (never creates a missing one). See :func:`testbed.netem.nsexec.in_netns`."""
    return in_netns(ns)


@contextmanager
def scratch_cgroup(hierarchy: Path, run_id: str) -> Iterator[Path]:
    """An empty child cgroup of ``hierarchy`` (no task is ever put in it)."""
    path = hierarchy / cgroup_name(run_id)
    try:
        path.mkdir()
        yield path
    finally:
        if path.is_dir():
            path.rmdir()


def sweep(run_id: str, cgroup_hierarchies: list[Path] = ()) -> list[str]:
    """Remove what run ``run_id`` still owns (namespaces, probe cgroups); return what was removed."""
    removed = []
    try:
        from pyroute2 import netns
    except ImportError:  # then no probe could have made a namespace
        names = []
    else:
        names = netns.listnetns()
    for name in names:
        if run_of_ns(name) == run_id:
            netns.remove(name)
            removed.append(name)
    for hierarchy in cgroup_hierarchies:
        path = hierarchy / cgroup_name(run_id)
        if path.is_dir():
            path.rmdir()
            removed.append(str(path))
    return removed
