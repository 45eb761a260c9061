"""What a run needs to be reproduced and trusted: inputs, versions, code, scale factors."""

from __future__ import annotations

import platform
import subprocess
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

import testbed

_PACKAGES = ("numpy", "pandas", "pyarrow", "pydantic", "PyYAML", "matplotlib", "pvlib", "openpyxl", "scipy")


def package_versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {"python": platform.python_version(), "testbed": testbed.__version__}
    for name in _PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def git_state() -> dict[str, str | bool | None]:
    repo = Path(testbed.__file__).resolve().parent.parent

    def git(*args: str) -> str | None:
        try:
            r = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return r.stdout.strip() if r.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": None if status is None else bool(status)}


def build_manifest(*, scenario_sha256: str, scenario_path: str, scenario_resolved: dict, seed: int,
                   substrate: dict, policies: list[dict], wall_s: dict[str, float], argv: list[str]) -> dict:
    return {
        "format": "testbed-results/1",
        "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": argv,
        "scenario": {"path": scenario_path, "sha256": scenario_sha256, "copy": "scenario.yaml", "resolved": scenario_resolved},
        "seed": seed,
        "substrate": substrate,
        "policies": policies,
        "wall_time_s": wall_s,
        "git": git_state(),
        "versions": package_versions(),
        "host": {"platform": platform.platform(), "python_executable": sys.executable},
    }
