"""Host directories a run may own beside its namespaces, and how to detach mounts under them.

The private Docker engine of a run (``testbed.runtime.dockerd``) lives in ``<base>/docker-<run>``;
``testbed clean`` removes that directory after detaching the mounts below it, so both the
location and the unmount sit here, below the runtime and the cleaner that both use them.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

DEFAULT_BASE_DIR = Path(os.environ.get("TESTBED_DOCKER_DIR", "/var/lib/testbed"))
MNT_DETACH = 2
_libc = ctypes.CDLL(None, use_errno=True)


def engine_dir(run_id: str, base_dir: str | Path = DEFAULT_BASE_DIR) -> Path:
    """The run's private engine directory (not resolved)."""
    return Path(base_dir) / f"docker-{run_id}"


def unmount_under(path: Path) -> list[str]:
    """Detach every mount at or below ``path`` (deepest first). Returns the mount points."""
    root = str(Path(path).resolve())
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].encode().decode("unicode_escape")
        if point == root or point.startswith(root + "/"):
            points.append(point)
    for point in sorted(set(points), key=len, reverse=True):
        if _libc.umount2(point.encode(), MNT_DETACH) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"umount {point}: {os.strerror(err)}")
    return points
