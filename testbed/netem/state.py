"""Run state files: what a live run owns, so ``testbed clean`` and ``testbed net down`` can find
exactly our resources (and the PIDs we started) after a crash."""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path

STATE_DIR = Path(os.environ.get("TESTBED_STATE_DIR", "/run/testbed"))


def path_for(run_id: str) -> Path:
    return STATE_DIR / f"{run_id}.json"


def record(run_id: str, *, purpose: str, namespaces: list[str], pids: list[int], extra: dict | None = None) -> dict:
    return {
        "run_id": run_id,
        "purpose": purpose,
        "owner_pid": os.getpid(),
        "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "namespaces": namespaces,
        "pids": pids,
        **(extra or {}),
    }


def write(run_id: str, data: dict) -> None:
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    tmp = path_for(run_id).with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True))
    tmp.replace(path_for(run_id))


def read(run_id: str) -> dict | None:
    try:
        return json.loads(path_for(run_id).read_text())
    except (OSError, ValueError):
        return None


def remove(run_id: str) -> None:
    path_for(run_id).unlink(missing_ok=True)


def all_runs() -> list[str]:
    if not STATE_DIR.is_dir():
        return []
    return sorted(p.stem for p in STATE_DIR.glob("*.json"))


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def pid_cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
