"""Throwaway resources for probes, each removed on every exit path.

Namespaces are ``tb-<run>-doctor-<tag>``, interfaces ``tb<run><tag>a|b`` (made *inside* the
namespace, so removing the namespace removes them), cgroups ``tb-<run>-doctor``. Like a run's,
they are listed in the doctor's own state file (purpose ``doctor``) before they are made, so a
``testbed clean`` running at the same time sees whose they are and leaves them alone while the
doctor runs, and removes them if the doctor was killed. :func:`sweep` removes whatever the run id
still lists after its probes (a probe cut short by its deadline), then the state file.
"""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from testbed.netem.owned import state
from testbed.netem.owned.naming import if_name, ns_name
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
    from testbed.netem.nsmake import remove_netns

    remove_netns(name)


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


def _list(run_id: str, **resources: list) -> None:
    """List what a probe is about to make in the doctor's state file."""
    state.add(run_id, purpose="doctor", **resources)


@contextmanager
def scratch_netns(run_id: str, tag: str) -> Iterator[str]:
    """A fresh, empty network namespace; yields its name."""
    name = doctor_ns(run_id, tag)
    errors: list[BaseException] = []
    maker = _new_netns_thread(name, errors)
    _list(run_id, namespaces=[name])
    try:
        maker.start()
        maker.join()
        if errors:
            raise errors[0]
        yield name
    finally:
        if maker.is_alive() or maker.ident is not None:
            maker.join()  # a deadline may have cut the first join short: let it finish, then remove
        _remove_netns(name)
        state.discard(run_id, namespaces=[name])


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
    _list(run_id, cgroups=[path.name])
    try:
        path.mkdir()
        yield path
    finally:
        if path.is_dir():
            path.rmdir()
        state.discard(run_id, cgroups=[path.name])


def sweep(run_id: str, cgroup_hierarchies: list[Path] = ()) -> list[str]:
    """Remove what run ``run_id``'s state file still lists (namespaces, probe cgroups), then the
    state file; return what was removed."""
    removed = []
    listed = state.read(run_id) or {}
    if listed.get("purpose") not in (None, "doctor"):
        return removed  # not the doctor's run id: not ours to sweep
    for name in listed.get("namespaces", []):
        if name.startswith(ns_name(run_id, "doctor-")) and os.path.lexists(NETNS_DIR / name):
            _remove_netns(name)
            removed.append(name)
    wanted = [c for c in listed.get("cgroups", []) if c == cgroup_name(run_id)]
    paths = {hierarchy / c for hierarchy in cgroup_hierarchies for c in wanted}
    if wanted:
        from testbed.power.throttle.cgroups import find_cgroups_named

        paths |= {p for _, p in find_cgroups_named(wanted)}
    for path in sorted(paths):
        if path.is_dir():
            path.rmdir()
            removed.append(str(path))
    state.remove(run_id)
    return removed
