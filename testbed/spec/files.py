"""Checks on the files a scenario names (topology, traces, power profiles) before anything reads them.

A path may point anywhere: at a device (``/dev/zero`` never ends), a fifo (reading blocks), a
kernel file (``/proc/self/environ``: reported as a regular file of size 0, contents secret) or
a file too large to load. :func:`input_file_problem` refuses those with a message that names
the file and never its contents.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

KERNEL_ROOTS = ("/proc", "/sys", "/dev")
"""Pseudo-filesystems: their 'files' are process state or devices, never data files."""

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a fifo"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _under(path: Path, root: str) -> bool:
    return path == Path(root) or Path(root) in path.parents


NOT_FOUND = "file not found"


def input_file_problem(path: Path, max_bytes: int | None = None, limit_hint: str = "") -> str | None:
    """None if ``path`` is a readable regular data file within ``max_bytes``, else why not.

    ``limit_hint`` says how to raise the size limit (e.g. "limits.max_trace_mb in the scenario").
    """
    try:
        real = path.resolve()
    except (OSError, RuntimeError):
        return "cannot resolve the path (a symlink loop?)"
    for root in KERNEL_ROOTS:
        if _under(real, root):
            return f"is under {root}: not a data file"
    try:
        st = os.stat(real)
    except FileNotFoundError:
        return NOT_FOUND
    except PermissionError:
        return "cannot be read (permission denied)"
    except OSError as e:
        return f"cannot be read ({e.strerror or type(e).__name__})"
    for test, kind in _KINDS:
        if test(st.st_mode):
            return f"is {kind}, not a regular file"
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    if max_bytes is not None and st.st_size > max_bytes:
        hint = f" (raise it with {limit_hint})" if limit_hint else ""
        return f"is {_size(st.st_size)}, over the {_size(max_bytes)} limit{hint}"
    if not os.access(real, os.R_OK):
        return "cannot be read (permission denied)"
    return None


def _size(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} bytes"


def archive_problem(path: Path, max_bytes: int, limit_hint: str = "") -> str | None:
    """For a compressed file (``.xlsx`` is a zip archive, ``.gz``): None if it expands to at most
    ``max_bytes``, else why not. A few kB can stand for many GB ("zip bomb"); the loaders would
    inflate all of it in memory. Zip members' sizes come from the archive's directory (corrupt
    archives are left to the loader, which reports them); gzip is inflated in chunks and counted."""
    import gzip
    import zipfile
    import zlib

    name = path.name.lower()
    hint = f" (raise it with {limit_hint})" if limit_hint else ""
    if name.endswith((".xlsx", ".xlsm", ".zip")):
        try:
            with zipfile.ZipFile(path) as z:
                total = sum(info.file_size for info in z.infolist())
        except (zipfile.BadZipFile, OSError, ValueError):
            return None
        if total > max_bytes:
            return f"expands to {_size(total)} uncompressed, over the {_size(max_bytes)} limit{hint}"
        return None
    if name.endswith(".gz"):
        total = 0
        try:
            with gzip.open(path, "rb") as f:
                while chunk := f.read(1 << 20):
                    total += len(chunk)
                    if total > max_bytes:
                        return f"expands to more than {_size(max_bytes)} uncompressed, over the limit{hint}"
        except (OSError, EOFError, zlib.error):
            return None  # not gzip after all: the loader says so
    return None


def shipped_root() -> Path | None:
    """The folder testbed ships its topologies, trace samples and scenarios in (the repository of an
    editable install); None when this install has none."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "topologies").is_dir() else None


def _shipped(p: Path) -> list[Path]:
    """Where a relative path that is not beside its file may name a shipped file: from the
    repository (``topologies/eu-5.yaml``, ``traces/samples/...``) or from its scenarios
    (``data/carbon-paris-48h.csv``, which a copied shipped scenario names)."""
    root = shipped_root()
    return [] if root is None else [root / p, root / "scenarios" / p]


def resolve_file(name: str, base_dir: Path) -> Path | None:
    """A relative path is looked up relative to the file that names it (``base_dir``, its folder),
    then one level above that folder (so ``topologies/x.yaml`` works from ``scenarios/``), then
    among the files testbed ships: never from the working directory, so a file means the same
    wherever testbed runs."""
    candidates = file_places(name, base_dir)
    for c in candidates:
        if c.is_file():
            return c.resolve()
    for c in candidates:  # not a regular file: returned so that the caller can say what it is
        if c.exists():
            return c.resolve()
    return None


def file_places(name: str, base_dir: Path) -> list[Path]:
    """Where :func:`resolve_file` looks for ``name``, in order: an absolute path as it is; a relative
    one in ``base_dir``, then in its parent, then among the shipped files (:func:`_shipped`)."""
    p = Path(name).expanduser()
    return [p] if p.is_absolute() else [base_dir / p, base_dir.parent / p, *_shipped(p)]


def looked_for(name: str, base_dir: Path) -> str:
    """``looked for A, B, ...``: the absolute paths :func:`resolve_file` tried for ``name``."""
    return "looked for " + ", ".join(os.path.abspath(c) for c in file_places(name, base_dir))


_BARE_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


def builtin_topologies() -> list[str]:
    """The names of the shipped topologies (``topology: eu-5``)."""
    root = shipped_root()
    return sorted(p.stem for p in (root / "topologies").glob("*.yaml")) if root is not None else []


def resolve_topology(name: str, base_dir: Path) -> Path | None:
    """A topology a scenario names: a file (as :func:`resolve_file`), or a shipped topology by
    name (``eu-5``: ``topologies/eu-5.yaml`` of this install)."""
    import re

    path = resolve_file(name, base_dir)
    if path is None and re.match(_BARE_NAME, name) and not name.endswith((".yaml", ".yml")):
        root = shipped_root()
        builtin = root / "topologies" / f"{name}.yaml" if root is not None else None
        if builtin is not None and builtin.is_file():
            return builtin.resolve()
    return path


def trace_file(name: str, base_dir: Path, max_bytes: int) -> tuple[Path | None, str | None]:
    """A trace file a scenario names: ``(resolved path, None)`` when it can be read, else
    ``(None, why)`` (not found, not a regular file, too large, a bad archive)."""
    path = resolve_file(name, base_dir)
    if path is None:
        return None, NOT_FOUND
    hint = "limits.max_trace_mb in the scenario"
    why = input_file_problem(path, max_bytes, hint) or archive_problem(path, max_bytes, hint)
    return (None, why) if why is not None else (path, None)


def with_trace_file(src, field: str, base_dir: Path, max_bytes: int, problems: list):
    """``src`` (a trace source model) with its ``file`` resolved, or ``None``: no file (``src``
    unchanged is returned as ``src``), or a problem appended as ``(field, message)``."""
    file_name = getattr(src, "file", None)
    if file_name is None:
        return src
    path, why = trace_file(file_name, base_dir, max_bytes)
    if why is not None:
        where = f" ({looked_for(file_name, base_dir)})" if path is None and why == NOT_FOUND else ""
        problems.append((field, f"{why}: {file_name}{where}"))
        return None
    return src.model_copy(update={"file": str(path)})
