"""What the guest runs, packed on the host for each boot: the repository's code and tests and the
packages the guest's tests import (pytest, pyroute2, psutil, PyYAML, pydantic and what they
require), copied from this interpreter's site-packages with their compiled bytecode and extensions.

One tar file crosses the 9p share and is unpacked into the guest's tmpfs: under software
emulation, importing hundreds of modules file by file over 9p took ~15 s; from tmpfs it takes
about one. Nothing is pip-installed in the guest, and the image never changes with the code.
"""

from __future__ import annotations

import importlib.metadata as md
import re
import tarfile
from pathlib import Path

# The distributions the guest's tests import; their requirements are added (markers evaluated).
# Compiled extensions (psutil, PyYAML's libyaml binding, pydantic-core) work there too: the guest
# runs Debian's Python of the host's own release, the same minor version as the venv's.
GUEST_DISTRIBUTIONS = ("pytest", "pyroute2", "psutil", "PyYAML", "pydantic", "numpy")
REPO_PATHS = ("pyproject.toml", "testbed", "tests")
_SKIP_DIRS = {".pytest_cache", ".hypothesis"}


def _name(requirement: str) -> str:
    return re.split(r"[\s;<>=!~\[(]", requirement, maxsplit=1)[0]


def distributions(names: tuple[str, ...] = GUEST_DISTRIBUTIONS) -> list[md.Distribution]:
    """``names`` and everything they require here (no extras), each once, in a stable order."""
    from packaging.requirements import Requirement

    found: dict[str, md.Distribution] = {}
    todo = list(names)
    while todo:
        name = todo.pop(0)
        key = name.lower().replace("_", "-")
        if key in found:
            continue
        dist = md.distribution(name)
        found[key] = dist
        for spec in dist.requires or []:
            req = Requirement(spec)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(_name(spec))
    return [found[k] for k in sorted(found)]


def top_levels(dist: md.Distribution) -> list[str]:
    """What ``dist`` installed in its site-packages, relative to it: top-level folders and
    modules, plus the bytecode of top-level modules (in the shared ``__pycache__``)."""
    out = set()
    for f in dist.files or []:
        if not f.parts or f.parts[0] == "..":
            continue
        out.add("/".join(f.parts[:2]) if f.parts[0] == "__pycache__" else f.parts[0])
    base = Path(dist.locate_file(""))
    return [rel for rel in sorted(out) if (base / rel).exists()]


def _filter(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    if _SKIP_DIRS.intersection(Path(info.name).parts):
        return None
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


def write(path: Path, repo: Path, dists: list[md.Distribution] | None = None) -> dict:
    """Write the payload tar (``repo/...`` and ``pylib/...``); returns what went in."""
    dists = distributions() if dists is None else dists
    with tarfile.open(path, "w") as tar:
        for rel in REPO_PATHS:
            tar.add(repo / rel, arcname=f"repo/{rel}", filter=_filter)
        for dist in dists:
            base = Path(dist.locate_file(""))
            for rel in top_levels(dist):
                tar.add(base / rel, arcname=f"pylib/{rel}", filter=_filter)
    return {"bytes": path.stat().st_size, "distributions": {d.metadata["Name"]: d.version for d in dists}}
