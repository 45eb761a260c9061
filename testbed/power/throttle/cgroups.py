"""The cgroup filesystem as the throttles and ``testbed clean`` see it: mounts, names, removal.

Names are ``tb-<run>-<tag>`` so that :func:`remove_run_cgroups` finds exactly one run's cgroups
(the doctor's probe cgroup ``tb-<run>-doctor`` included) and nothing else. Removing a cgroup
first moves the tasks still in it to its parent: they keep running, unthrottled.
"""

from __future__ import annotations

import errno
import os
import re
import time
from pathlib import Path

from testbed.run_id import check_run_id
from testbed.power.errors import PowerError

_TAG_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


class ThrottleError(PowerError):
    """A CPU throttle could not be set up, changed or removed."""


class ThrottleUnavailable(ThrottleError):
    """This kind of throttle cannot be used here (the message says why)."""


def cgroup_name(run_id: str, tag: str) -> str:
    """``tb-<run>-<tag>``: what ``testbed clean --run`` recognises as this run's."""
    if not _TAG_RE.match(tag):
        raise ValueError(f"throttle tag must match {_TAG_RE.pattern}, got {tag!r}")
    return f"tb-{check_run_id(run_id)}-{tag}"


def cgroup_mounts(mounts: Path = Path("/proc/self/mounts")) -> dict[str, Path]:
    """{"v1_cpu": the v1 hierarchy with the cpu controller, "v2": the cgroup2 mount}."""
    found: dict[str, Path] = {}
    for line in mounts.read_text().splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        point, fstype, options = Path(fields[1]), fields[2], fields[3].split(",")
        if fstype == "cgroup" and "cpu" in options:
            found.setdefault("v1_cpu", point)
        elif fstype == "cgroup2":
            found.setdefault("v2", point)
    return found


def own_cgroup(mount: Path, version: int, proc_cgroup: Path = Path("/proc/self/cgroup")) -> Path:
    """This process's cgroup in ``mount`` (the mount itself when it cannot be placed there)."""
    for line in proc_cgroup.read_text().splitlines():
        hid, controllers, rel = line.split(":", 2)
        if (version == 2 and hid == "0") or (version == 1 and "cpu" in controllers.split(",")):
            path = mount / rel.lstrip("/")
            return path if path.is_dir() else mount
    return mount


def read_ids(path: Path) -> list[int]:
    try:
        return [int(x) for x in path.read_text().split()]
    except FileNotFoundError:
        return []


def release_cgroup(path: Path, tasks_file: str = "tasks", *, timeout_s: float = 2.0) -> None:
    """Move every task of cgroup ``path`` to its parent, then remove it (children first)."""
    if path.is_dir():
        for child in sorted(p for p in path.iterdir() if p.is_dir()):
            release_cgroup(child, tasks_file, timeout_s=timeout_s)
    deadline = time.monotonic() + timeout_s
    while path.is_dir():
        for tid in read_ids(path / tasks_file):
            try:
                (path.parent / tasks_file).write_text(str(tid))
            except ProcessLookupError:  # exited meanwhile
                pass
            except OSError as e:
                raise ThrottleError(f"cannot move task {tid} out of {path}: {e.strerror}") from e
        try:
            path.rmdir()
        except OSError as e:
            if e.errno != errno.EBUSY or time.monotonic() > deadline:  # EBUSY: a task still exiting
                raise ThrottleError(f"cannot remove cgroup {path}: {e.strerror}") from e
            time.sleep(0.02)


def _hierarchies(mounts: dict[str, Path] | None) -> list[tuple[int, Path]]:
    m = cgroup_mounts() if mounts is None else mounts
    return [(v, m[k]) for v, k in ((1, "v1_cpu"), (2, "v2")) if k in m]


def find_run_cgroups(run_id: str | None = None, *, mounts: dict[str, Path] | None = None,
                     max_depth: int = 6) -> list[tuple[int, Path]]:
    """Cgroups named ``tb-<run>-*`` (any run when ``run_id`` is None), as (version, path)."""
    pattern = re.compile(rf"^tb-{re.escape(check_run_id(run_id)) if run_id else '[a-z0-9]{6}'}-")
    found = []
    for version, mount in _hierarchies(mounts):
        base_depth = len(mount.parts)
        for dirpath, dirnames, _ in os.walk(mount):
            here = Path(dirpath)
            ours = [d for d in sorted(dirnames) if pattern.match(d)]
            found += [(version, here / d) for d in ours]
            deeper = len(here.parts) - base_depth < max_depth
            dirnames[:] = [d for d in dirnames if d not in ours] if deeper else []  # not into ours
    return found


def all_hierarchies(mounts: Path = Path("/proc/self/mounts")) -> list[tuple[int, Path]]:
    """Every mounted cgroup hierarchy (v1: each controller's; v2: the unified one), as (version, path)."""
    found: list[tuple[int, Path]] = []
    try:
        lines = mounts.read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        fields = line.split()
        if len(fields) >= 3 and fields[2] in ("cgroup", "cgroup2"):
            entry = (1 if fields[2] == "cgroup" else 2, Path(fields[1]))
            if entry not in found:
                found.append(entry)
    return found


def find_cgroups_named(names, *, mounts: dict[str, Path] | None = None,
                       max_depth: int = 6) -> list[tuple[int, Path]]:
    """Cgroups whose directory name is one of ``names`` exactly (what a run's state file lists), in
    every hierarchy, as (version, path); not looked into once found."""
    wanted = set(names)
    found = []
    if not wanted:
        return found
    for version, mount in (_hierarchies(mounts) if mounts is not None else all_hierarchies()):
        base_depth = len(mount.parts)
        for dirpath, dirnames, _ in os.walk(mount):
            here = Path(dirpath)
            ours = [d for d in sorted(dirnames) if d in wanted]
            found += [(version, here / d) for d in ours]
            deeper = len(here.parts) - base_depth < max_depth
            dirnames[:] = [d for d in dirnames if d not in ours] if deeper else []
    return found


def release_named(version: int, path: Path) -> None:
    """Remove one cgroup found by :func:`find_cgroups_named` (tasks moved to the parent first)."""
    release_cgroup(path, "tasks" if version == 1 else "cgroup.procs")


def run_of_cgroup(path: Path) -> str | None:
    m = re.match(r"^tb-([a-z0-9]{6})-", path.name)
    return m.group(1) if m else None


def remove_run_cgroups(run_id: str, *, mounts: dict[str, Path] | None = None) -> list[str]:
    """Remove every ``tb-<run>-*`` cgroup (tasks moved to the parent first); their paths."""
    removed = []
    for version, path in find_run_cgroups(run_id, mounts=mounts):
        release_cgroup(path, "tasks" if version == 1 else "cgroup.procs")
        removed.append(str(path))
    return removed
