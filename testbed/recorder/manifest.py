"""What a run needs to be reproduced and trusted: inputs, versions, code, scale factors."""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

import testbed
from testbed.recorder.reader import RESULTS_FORMAT

_HASH_CHUNK_BYTES = 1 << 20

ORIGINAL_COPY = "scenario.original.yaml"
"""A run with overrides keeps the scenario file as written here (``scenario.yaml`` holds what ran)."""

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
    # results/ holds outputs (the committed reference among them), never code or inputs: a reference
    # being regenerated must not make the runs that regenerate it "dirty"
    status = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)results")
    return {"commit": commit, "dirty": None if status is None else bool(status)}


def file_sha256(path: Path) -> str:
    """sha256 of a file's bytes, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_HASH_CHUNK_BYTES), b""):
            h.update(chunk)
    return h.hexdigest()


def _named_files(resolved: dict, topology_path: Path | None) -> list[tuple[str, str, Path]]:
    """(field path, name as written, path) of every file a resolved scenario reads besides itself:
    its topology file (the path the loader found, ``topology_path``), renewable, grid-signal and
    cross-traffic trace files and power-profile files (the loader has made all but the topology's
    absolute)."""
    out: list[tuple[str, str, Path]] = []
    if isinstance(resolved.get("topology"), str) and topology_path is not None:
        out.append(("topology", resolved["topology"], Path(topology_path)))
    renewable = (resolved.get("traces") or {}).get("renewable") or {}
    for key in sorted(renewable):
        src = renewable[key]
        if isinstance(src, dict) and isinstance(src.get("file"), str):
            out.append((f"traces.renewable.{key}.file", src["file"], Path(src["file"])))
    for signal in ("carbon", "price"):  # grid-signal CSVs (testbed.spec.grid_signals; paths made absolute)
        sources = ((resolved.get("traces") or {}).get(signal) or {}).get("sites") or {}
        for key in sorted(sources):
            src = sources[key]
            if isinstance(src, dict) and isinstance(src.get("file"), str):
                out.append((f"traces.{signal}.sites.{key}.file", src["file"], Path(src["file"])))
    cross_traffic = resolved.get("cross_traffic")  # a load level (no file) or entries (paths made absolute)
    for i, entry in enumerate(cross_traffic if isinstance(cross_traffic, list) else []):
        if isinstance(entry, dict) and isinstance(entry.get("trace"), str):
            out.append((f"cross_traffic[{i}].trace", entry["trace"], Path(entry["trace"])))
    node_types = resolved.get("node_types") or {}
    for name in sorted(node_types):
        ref = node_types[name].get("power_profile") if isinstance(node_types[name], dict) else None
        if isinstance(ref, str) and Path(ref).is_absolute():  # a shipped profile is named, not a file
            out.append((f"node_types.{name}.power_profile", ref, Path(ref)))
    return out


def input_files(scenario_path: str | Path, resolved: dict, topology_path: Path | None = None) -> list[dict]:
    """One entry per input file the scenario reads: the field naming it, its path relative to the
    scenario file's folder, its size and sha256 (``sha256: null`` and ``problem`` if it can no
    longer be read when the manifest is written). Paths are the ones the loader resolved (the
    topology's is ``topology_path``), so the working directory at write time does not matter."""
    base = Path(scenario_path).resolve().parent
    entries = []
    for field, name, path in _named_files(resolved, topology_path):
        entry: dict = {"field": field, "path": os.path.relpath(path, base) if path.is_absolute() else name}
        try:
            entry["bytes"] = path.stat().st_size
            entry["sha256"] = file_sha256(path)
        except OSError as e:
            entry.update(bytes=None, sha256=None, problem=f"cannot be read ({type(e).__name__})")
        entries.append(entry)
    return entries


def build_manifest(*, scenario_sha256: str, scenario_path: str, scenario_resolved: dict, seed: int,
                   substrate: dict, policies: list[dict], wall_s: dict[str, float], argv: list[str],
                   topology_path: Path | None = None, original: dict | None = None) -> dict:
    """``original``: set when the scenario that ran is a file with overrides (``scenario.yaml`` is then
    what ran; the file as written is kept as ``original["copy"]``, with its sha256 and the overrides)."""
    scenario = {"path": scenario_path, "sha256": scenario_sha256, "copy": "scenario.yaml", "resolved": scenario_resolved}
    if original is not None:
        scenario["original"] = original
    extra = {}
    traces = scenario_resolved.get("traces") or {}
    if traces.get("carbon") is not None or traces.get("price") is not None:
        price = traces.get("price") or {}
        extra["grid_signals"] = {  # what summary.json's co2_kg and grid_cost are in
            "co2_kg": "kg CO2 of grid energy" if traces.get("carbon") is not None else None,
            "grid_cost": f"{price['currency']} for grid energy" if price.get("currency") else None,
            "currency": price.get("currency"),
        }
    return {
        "format": RESULTS_FORMAT,
        "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": argv,
        "scenario": scenario,
        "input_files": input_files(scenario_path, scenario_resolved, topology_path),
        "seed": seed,
        "substrate": substrate,
        "policies": policies,
        "wall_time_s": wall_s,
        "git": git_state(),
        "versions": package_versions(),
        "host": {"platform": platform.platform(), "python_executable": sys.executable},
        **extra,
    }
