"""Where testbed may write an output directory, and what ``--force`` may replace.

One function, :func:`check_out_dir`, decides for ``testbed run``, ``testbed sweep`` and
``testbed report`` (and the federated run, and sweep trials). The rule: testbed never deletes
or writes into what it did not create.

- Refused outright (exit 2, ``error: --out PATH: why``): ``.``, ``..``, ``/`` and any path whose last
  part is one of them; a symbolic link (dangling or not); an existing file or other non-directory;
  a path on a special filesystem (``/proc``, ``/sys``, ``/dev``, or any proc/sysfs/devtmpfs/cgroup...
  mount); a path that is, or contains, the current directory, the home directory, the testbed
  repository, or one of the command's inputs (the scenario file, the sweep file, the report's input
  directories); a parent that is not a writable directory; a non-empty directory that does not carry
  this kind's testbed marker.
- An existing *empty* directory may be used.
- A directory carrying the marker of the same kind was written by testbed: ``run`` replaces it only with
  ``--force``; ``sweep`` resumes into it (``--force`` clears what the earlier sweep wrote); ``report``
  regenerates it (a report is derived data).

Markers: a JSON file whose ``format`` starts with the kind's prefix (the files and formats are
:data:`testbed.recorder.reader.MARKERS`).
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable

from testbed.errors import OutDirError
from testbed.recorder import reader

# kind -> (file, format prefix): any version of the kind's format (testbed/recorder/reader.py)
MARKERS: dict[str, tuple[str, str]] = {kind: (name, fmt[: fmt.index("/") + 1])
                                       for kind, (name, fmt) in reader.MARKERS.items()}


RESULTS_ROOT_ENV = "TESTBED_RESULTS_ROOT"


def results_root() -> Path:
    """Where every command writes when it is given no --out: ``results/`` in the working directory,
    or ``$TESTBED_RESULTS_ROOT`` (runs, sweeps, benches, calibrations, the GPU check: one root)."""
    return Path(os.environ.get(RESULTS_ROOT_ENV) or "results")


def default_out_dir(name: str, seed: int) -> Path:
    """``<results root>/<name>-s<seed>-<UTC stamp>``: where a run writes when no --out is given."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return results_root() / f"{name}-s{seed}-{stamp}"


_WHAT = {"run": "a run's results", "sweep": "a sweep", "report": "a report"}
_MARKER_MAX_BYTES = 64 * 1024 * 1024  # a run manifest holds the resolved scenario: large, never this large

SPECIAL_ROOTS = (Path("/proc"), Path("/sys"), Path("/dev"))
SPECIAL_FS_TYPES = frozenset({
    "proc", "sysfs", "devtmpfs", "devpts", "cgroup", "cgroup2", "debugfs", "tracefs", "securityfs", "configfs",
    "bpf", "pstore", "mqueue", "fusectl", "efivarfs", "binfmt_misc", "autofs", "hugetlbfs", "rpc_pipefs", "nsfs",
})


@dataclass(frozen=True)
class OutDir:
    """A checked output directory. ``path``: absolute, its parent's symbolic links resolved."""

    path: Path
    kind: str
    exists: bool   # an existing directory (empty, or carrying this kind's marker)
    marked: bool   # it carries this kind's marker: testbed wrote it


NAME_MAX_BYTES = 255
PATH_MAX_BYTES = 4095
WORKING_SUFFIX_BYTES = len(".") + len(".partial-") + 10  # atomic_dir's working name around the last name


def _check_lengths(flag: str, text: str) -> None:
    raw = os.fsencode(text)
    if len(raw) > PATH_MAX_BYTES:
        raise _fail(flag, text[:60] + "...", f"is longer than {PATH_MAX_BYTES} bytes")
    parts = raw.rstrip(b"/").split(b"/")
    if any(len(part) > NAME_MAX_BYTES for part in parts):
        raise _fail(flag, text[:60] + "...", f"has a name longer than {NAME_MAX_BYTES} bytes")
    if len(parts[-1]) > NAME_MAX_BYTES - WORKING_SUFFIX_BYTES:  # room for .NAME.partial-PID beside it
        raise _fail(flag, text[:60] + "...", f"its last name is longer than {NAME_MAX_BYTES - WORKING_SUFFIX_BYTES} bytes")


def _fail(flag: str, out: object, why: str) -> OutDirError:
    e = OutDirError(f"{flag} {out}: {why}")
    e.flag, e.why = flag, why
    return e


def marker_format(directory: Path) -> str | None:
    """The ``format`` of the testbed marker ``directory`` carries (any kind), else None.
    Only regular files are read (never through a link), and only the ``format`` key is used."""
    for name, prefix in MARKERS.values():
        fmt = _read_format(directory / name)
        if fmt is not None and fmt.startswith(prefix):
            return fmt
    return None


def _read_format(path: Path) -> str | None:
    try:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size > _MARKER_MAX_BYTES:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    fmt = data.get("format") if isinstance(data, dict) else None
    return fmt if isinstance(fmt, str) else None


def carries_marker(directory: Path, kind: str) -> bool:
    name, prefix = MARKERS[kind]
    fmt = _read_format(directory / name)
    return fmt is not None and fmt.startswith(prefix)


def _mount_fstype(path: Path) -> str | None:
    """The filesystem type of the mount holding ``path`` (an existing path), from /proc/self/mounts."""
    try:
        text = Path("/proc/self/mounts").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    best, fstype = -1, None
    p = str(path)
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        mnt = parts[1].encode().decode("unicode_escape") if "\\" in parts[1] else parts[1]
        if (p == mnt or p.startswith(mnt.rstrip("/") + "/")) and len(mnt) > best:
            best, fstype = len(mnt), parts[2]
    return fstype


def _nearest_existing(path: Path) -> Path:
    while not os.path.lexists(path) and path != path.parent:
        path = path.parent
    return path


def repository_root() -> Path:
    import testbed

    return Path(testbed.__file__).resolve().parent.parent


def default_protected() -> list[tuple[Path, str]]:
    """What no output directory may be or contain, whatever the command."""
    out = [(Path(os.getcwd()), "the current directory"), (repository_root(), "the testbed repository")]
    try:
        out.append((Path.home().resolve(), "the home directory"))
    except (RuntimeError, KeyError, OSError):
        pass
    return out


def check_out_dir(out: Path | str, *, kind: str, force: bool = False, protect: Iterable[Path | str] = (),
                  flag: str = "--out") -> OutDir:
    """Decide whether ``out`` may be written as a ``kind`` output directory (see the module doc).
    ``protect``: the command's inputs (files or directories) that ``out`` must not be or contain.
    Raises :class:`~testbed.errors.OutDirError` (exit 2) naming ``flag`` and ``out``."""
    if kind not in MARKERS:
        raise ValueError(f"unknown output kind {kind!r}")
    text = os.fspath(out)
    if "\0" in text:
        raise _fail(flag, repr(text), "contains a NUL byte")
    if text.strip() == "":
        raise _fail(flag, repr(text), "is empty")
    given = Path(text)
    _check_lengths(flag, text)
    name = os.path.basename(text.rstrip("/")) if text.rstrip("/") else ""
    if text.rstrip("/") == "" or given == Path("/"):
        raise _fail(flag, text, "is the root directory")
    if name in ("", ".", ".."):
        raise _fail(flag, text, "names the current or a parent directory, not a directory of its own")
    try:
        st = os.lstat(given)
    except FileNotFoundError:
        st = None
    except NotADirectoryError:
        bad = next((a for a in given.parents if os.path.lexists(a) and not os.path.isdir(a)), given.parent)
        raise _fail(flag, text, f"{bad} is not a directory") from None
    except OSError as e:
        raise _fail(flag, text, f"cannot be examined: {e.strerror}") from None
    if st is not None and stat.S_ISLNK(st.st_mode):
        raise _fail(flag, text, "is a symbolic link (testbed writes results only to a real directory)")
    try:
        parent = Path(os.path.realpath(given.parent if str(given.parent) else "."))
    except (OSError, ValueError) as e:
        raise _fail(flag, text, f"its parent cannot be resolved: {e}") from None
    path = parent / name
    where = _special(path)
    if where is not None:
        raise _fail(flag, text, f"is on a special filesystem ({where}), not a place for results")
    _check_protected(flag, text, path, protect)
    if st is not None and not stat.S_ISDIR(st.st_mode):
        raise _fail(flag, text, "exists and is not a directory (testbed replaces only directories it wrote)")
    anchor = _nearest_existing(parent)
    if not anchor.is_dir():
        raise _fail(flag, text, f"{anchor} is not a directory")
    if not os.access(anchor, os.W_OK | os.X_OK):
        raise _fail(flag, text, f"cannot create it: {anchor} is not writable")
    if st is None:
        return OutDir(path, kind, exists=False, marked=False)
    try:
        with os.scandir(path) as it:
            empty = next(it, None) is None
    except OSError as e:
        raise _fail(flag, text, f"cannot be read: {e.strerror}") from None
    if empty:
        return OutDir(path, kind, exists=True, marked=False)
    if carries_marker(path, kind):
        if kind == "run" and not force:
            raise _fail(flag, text, "holds earlier results (use --force to replace them)")
        return OutDir(path, kind, exists=True, marked=True)
    other = marker_format(path)
    if other is not None:
        raise _fail(flag, text, f"holds testbed output of another kind ({other}), not {_WHAT[kind]}: refusing to "
                                "write there")
    marker = MARKERS[kind][0]
    raise _fail(flag, text, f"is not empty and was not written by testbed (no testbed {marker}): refusing to "
                            f"{'replace' if force else 'write into'} it")


def _check_protected(flag: str, text: str, path: Path, protect: Iterable[Path | str]) -> None:
    items = [(Path(p), None) for p in protect] + default_protected()
    for p, label in items:
        try:
            real = Path(os.path.realpath(p))
        except (OSError, ValueError):
            continue
        what = label or f"the input {p}"
        if real == path:
            raise _fail(flag, text, f"is {what}")
        if path in real.parents:
            raise _fail(flag, text, f"contains {what}")


def _special(path: Path) -> str | None:
    for root in SPECIAL_ROOTS:
        if path == root or root in path.parents:
            return str(root)
    fstype = _mount_fstype(_nearest_existing(path))
    return fstype if fstype in SPECIAL_FS_TYPES else None


def check_out_file(out: Path | str, *, flag: str, create_parents: bool = False) -> Path:
    """May testbed write (or overwrite) the single file ``out`` (a figure, a profile, a JSON report)?
    Refused: a directory, a symbolic link, anything but a regular file where one exists, a path on a
    special filesystem, a parent that is missing (unless ``create_parents``), not a directory or not
    writable. Returns the absolute path (parent's links resolved)."""
    text = os.fspath(out)
    if "\0" in text or text.strip() == "":
        raise _fail(flag, repr(text), "is not a file name")
    given = Path(text)
    _check_lengths(flag, text)
    if text.endswith("/") or given.name in ("", ".", ".."):
        raise _fail(flag, text, "names a directory, not a file")
    try:
        st = os.lstat(given)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise _fail(flag, text, f"cannot be examined: {e.strerror}") from None
    if st is not None and stat.S_ISLNK(st.st_mode):
        raise _fail(flag, text, "is a symbolic link (testbed does not write through links)")
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise _fail(flag, text, "is a directory, not a file")
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise _fail(flag, text, "exists and is not a regular file")
    parent = Path(os.path.realpath(given.parent if str(given.parent) else "."))
    path = parent / given.name
    where = _special(path)
    if where is not None:
        raise _fail(flag, text, f"is on a special filesystem ({where}), not a place for output")
    anchor = _nearest_existing(parent)
    if anchor != parent and not create_parents:
        raise _fail(flag, text, f"directory does not exist: {parent}")
    if not anchor.is_dir():
        raise _fail(flag, text, f"{anchor} is not a directory")
    if not os.access(anchor, os.W_OK | os.X_OK):
        raise _fail(flag, text, f"cannot write there: {anchor} is not writable")
    return path
