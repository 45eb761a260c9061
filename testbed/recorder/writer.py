"""Write a run directory atomically: everything goes to a hidden sibling, renamed at the end,
so a failed or interrupted run leaves nothing half-written and replaces nothing it may not.

What may be written or replaced is decided by :mod:`testbed.recorder.out_dir` (``--force`` replaces only
a directory testbed wrote). Working names beside ``OUT``: ``.OUT.partial-PID`` (being written) and
``.OUT.old-PID`` (the replaced directory, during the swap); see :data:`PARTIAL_RE`."""

from __future__ import annotations

import json
import os
import re
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator

import pandas as pd

from testbed.errors import OutDirError
from testbed.lifecycle import critical
from testbed.recorder.out_dir import OutDir
from testbed.recorder.out_dir import check_out_dir as check

# The working names atomic_dir uses beside OUT (``PARENT/OUT``): ``.OUT.partial-PID`` while the results
# are being written, ``.OUT.old-PID`` for the instant the directory being replaced is swapped out.
PARTIAL_RE = re.compile(r"^\.(?P<name>.+)\.(?P<what>partial|old)-(?P<pid>[0-9]+)$")


def write_json(path: Path, data: object) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True, allow_nan=False, default=str) + "\n", encoding="utf-8")


def write_table(path: Path, df: pd.DataFrame) -> None:
    df.to_parquet(path, index=False)


def check_out_dir(out_dir: Path, force: bool, *, kind: str = "run", protect: Iterable[Path | str] = ()) -> OutDir:
    """May ``out_dir`` be written (see :mod:`testbed.recorder.out_dir`)? Raises OutDirError if not."""
    return check(out_dir, kind=kind, force=force, protect=protect)


def partial_dir(out_dir: Path, pid: int | None = None) -> Path:
    """Where ``atomic_dir`` builds ``out_dir``: ``PARENT/.NAME.partial-PID`` (see PARTIAL_RE)."""
    return out_dir.parent / f".{out_dir.name}.partial-{os.getpid() if pid is None else pid}"


def old_dir(out_dir: Path, pid: int | None = None) -> Path:
    """Where ``atomic_dir`` moves the directory it replaces, for the instant of the swap: ``.NAME.old-PID``."""
    return out_dir.parent / f".{out_dir.name}.old-{os.getpid() if pid is None else pid}"


def leftover_of(path: Path) -> tuple[str, int] | None:
    """``(NAME, PID)`` if ``path``'s name is one of atomic_dir's working names (PARTIAL_RE), else None.
    Such a directory whose PID is no longer a live testbed process is a leftover ``testbed clean`` may remove."""
    m = PARTIAL_RE.match(path.name)
    return (m.group("name"), int(m.group("pid"))) if m else None


def _make_parents(directory: Path) -> list[Path]:
    """mkdir -p ``directory``; returns the folders it created (deepest first), to remove them on failure."""
    made = []
    d = directory
    while not os.path.lexists(d):
        made.append(d)
        d = d.parent
    try:
        for m in reversed(made):
            try:
                m.mkdir()
            except FileExistsError:
                pass
    except BaseException:
        _remove_made(made)
        raise
    return made


def _remove_made(made: list[Path]) -> None:
    for m in made:  # deepest first; only if still empty (one not made yet is skipped)
        if m.is_symlink() or not m.is_dir():
            continue
        try:
            m.rmdir()
        except OSError:
            break


def _rmtree(path: Path) -> None:
    """Remove a working directory of ours: never through a link, and never interrupted half-way."""
    with critical():
        if path.is_symlink():
            path.unlink()
        elif path.exists():
            shutil.rmtree(path, ignore_errors=True)


@contextmanager
def atomic_dir(out_dir: Path, force: bool, *, kind: str = "run", protect: Iterable[Path | str] = ()) -> Iterator[Path]:
    """Build ``out_dir`` in ``.NAME.partial-PID`` beside it and rename it into place at the end.
    ``out_dir`` is checked first (:func:`check_out_dir`) and again just before the swap. On success,
    failure or KeyboardInterrupt no ``.NAME.partial-PID`` or ``.NAME.old-PID`` is left behind (the swap
    and the removals run with SIGINT/SIGTERM held back, :func:`testbed.lifecycle.critical`); only a
    SIGKILL can leave one, which ``testbed clean`` recognises by its name (:data:`PARTIAL_RE`,
    :func:`leftover_of`)."""
    checked = check_out_dir(out_dir, force, kind=kind, protect=protect)
    out = checked.path
    tmp = partial_dir(out)
    made: list[Path] = []
    created = False
    try:
        with critical():
            made = _make_parents(out.parent)
            if os.path.lexists(tmp):  # a leftover of a dead process that had our PID: ours by its name
                if tmp.is_symlink() or not tmp.is_dir():
                    raise OutDirError(f"--out {out_dir}: {tmp} is in the way (not a directory testbed made)")
                _rmtree(tmp)
            tmp.mkdir()
            created = True
        yield tmp
        check_out_dir(out_dir, force, kind=kind, protect=protect)  # nothing changed under us meanwhile
        with critical():
            _commit(tmp, out)
    except BaseException:
        with critical():
            if created:
                _rmtree(tmp)
            _remove_made(made)
        raise


def _commit(tmp: Path, out: Path) -> None:
    """Swap ``tmp`` into ``out`` (signals held back by the caller)."""
    if not os.path.lexists(out):
        tmp.rename(out)
        return
    if not any(out.iterdir()):  # an empty directory the user made: replace it, or fill it if it is a mount point
        try:
            tmp.rename(out)
        except OSError:
            for child in tmp.iterdir():
                shutil.move(str(child), str(out / child.name))
            tmp.rmdir()
        return
    old = old_dir(out)
    if os.path.lexists(old):
        _rmtree(old)
    out.rename(old)
    try:
        tmp.rename(out)
    except BaseException:
        old.rename(out)
        raise
    shutil.rmtree(old, ignore_errors=True)
