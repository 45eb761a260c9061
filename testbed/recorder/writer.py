"""Write a run directory atomically: everything goes to a hidden sibling, renamed at the end,
so a failed or interrupted run leaves nothing half-written and replaces nothing."""

from __future__ import annotations

import json
import os
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pandas as pd

from testbed.errors import SpecError


def write_json(path: Path, data: object) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True, allow_nan=False, default=str) + "\n", encoding="utf-8")


def write_table(path: Path, df: pd.DataFrame) -> None:
    df.to_parquet(path, index=False)


def check_out_dir(out_dir: Path, force: bool) -> None:
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())) and not force:
        raise SpecError([("--out", f"{out_dir} exists and is not empty (use --force to replace it)")])


@contextmanager
def atomic_dir(out_dir: Path, force: bool) -> Iterator[Path]:
    check_out_dir(out_dir, force)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_dir.parent / f".{out_dir.name}.partial-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if out_dir.exists():
        old = out_dir.parent / f".{out_dir.name}.old-{os.getpid()}"
        out_dir.rename(old)
        tmp.rename(out_dir)
        shutil.rmtree(old, ignore_errors=True)
    else:
        tmp.rename(out_dir)
