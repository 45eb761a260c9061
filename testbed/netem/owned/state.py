"""Run state files: what a live run owns, so ``testbed clean`` and ``testbed net down`` can find
exactly our resources (and the PIDs we started) after a crash.

One file per run, ``<STATE_DIR>/<run>.json``, written by testbed only. It carries the marker
``"format": "testbed-state/1"`` and its own run id (which must match the file name); ``clean``
acts only on files that pass :func:`validate`, and only on what they list. Every resource is added
to the file *before* it is created (:func:`add`) and discarded from it once removed
(:func:`discard`); the file goes when it lists nothing any more.

Resource lists (all optional, all lists):

=============  ===========================================================================
namespaces     named network namespaces (``tb-<run>-...``)
interfaces     interfaces that may sit in the root namespace (``tb<run>...``)
pids           processes we started (ended by PID, only while their command line names the run)
cgroups        cgroup directory names (``tb-<run>`` or ``tb-<run>-...``), in any hierarchy
tmp_dirs       directories directly under the system temp dir named ``tb-<run>-...``
partial_dirs   hidden ``.NAME.partial-PID`` results directories being written
engine_dirs    a private Docker engine's run directory ``<TESTBED_DOCKER_DIR>/docker-<run>``
=============  ===========================================================================
"""

from __future__ import annotations

import json
import os
import stat
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

from testbed.errors import TestbedError
from testbed.netem.owned.naming import RUN_ID_RE

STATE_DIR = Path(os.environ.get("TESTBED_STATE_DIR", "/run/testbed"))
FORMAT = "testbed-state/1"
PURPOSES = ("run", "net", "federated", "doctor")
RESOURCE_KEYS = ("namespaces", "interfaces", "pids", "cgroups", "tmp_dirs", "partial_dirs", "engine_dirs")
MAX_STATE_BYTES = 16 << 20
# the ledger of machine-wide settings testbed changed for its runs (testbed.netem.tcp_cc), kept beside the runs'
# files: not a run's state file, never reported as a stray
TCP_ALLOWED_LEDGER = ".host-tcp-allowed.json"
_lock = threading.RLock()  # read-modify-write from several threads of one process


class StateFileError(TestbedError, ValueError):
    """A file in the state directory that testbed did not write, or not in this shape."""


@dataclass(frozen=True)
class Stray:
    path: Path
    reason: str


def path_for(run_id: str) -> Path:
    return STATE_DIR / f"{run_id}.json"


def _owner_started(pid: int) -> float | None:
    try:
        import psutil

        return psutil.Process(pid).create_time()
    except Exception:  # noqa: BLE001 (psutil missing or the process gone)
        return None


def record(run_id: str, *, purpose: str, namespaces: list[str] = (), pids: list[int] = (),
           extra: dict | None = None) -> dict:
    data = {
        "format": FORMAT,
        "run_id": run_id,
        "purpose": purpose,
        "owner_pid": os.getpid(),
        "owner_started": _owner_started(os.getpid()),
        "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        **{k: [] for k in RESOURCE_KEYS},
        **(extra or {}),
    }
    data["namespaces"] = list(namespaces)
    data["pids"] = [int(p) for p in pids]
    return data


def validate(run_id: str, data: object) -> dict:
    """``data`` as a state file of run ``run_id`` written by testbed, or :class:`StateFileError`."""
    if not isinstance(data, dict):
        raise StateFileError("not a JSON object")
    if data.get("format") != FORMAT:
        raise StateFileError(f"no testbed marker (format {FORMAT!r})")
    rid = data.get("run_id")
    if not isinstance(rid, str) or not RUN_ID_RE.match(rid) or rid != run_id:
        raise StateFileError("run_id does not match the file name")
    if data.get("purpose") not in PURPOSES:
        raise StateFileError(f"purpose must be one of {', '.join(PURPOSES)}")
    owner = data.get("owner_pid")
    if not isinstance(owner, int) or isinstance(owner, bool) or owner <= 0:
        raise StateFileError("owner_pid must be a positive integer")
    started = data.get("owner_started")
    if started is not None and not isinstance(started, (int, float)):
        raise StateFileError("owner_started must be a number")
    for key in RESOURCE_KEYS:
        items = data.get(key, [])
        if not isinstance(items, list):
            raise StateFileError(f"{key} must be a list")
        if key == "pids":
            if not all(isinstance(p, int) and not isinstance(p, bool) and p > 0 for p in items):
                raise StateFileError("pids must be positive integers")
        elif not all(isinstance(x, str) and x and "\0" not in x for x in items):
            raise StateFileError(f"{key} must be non-empty strings")
    return data


def _read_checked(path: Path) -> dict:
    run_id = path.name[: -len(".json")] if path.name.endswith(".json") else ""
    if not RUN_ID_RE.match(run_id):
        raise StateFileError("not a run state file name (<run id>.json)")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as e:
        raise StateFileError(f"cannot be opened: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise StateFileError("not a regular file")
        if st.st_size > MAX_STATE_BYTES:
            raise StateFileError(f"larger than {MAX_STATE_BYTES} bytes")
        raw = os.read(fd, MAX_STATE_BYTES + 1)
    finally:
        os.close(fd)
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):
        raise StateFileError("not valid JSON") from None
    return validate(run_id, data)


def load(run_id: str) -> dict:
    """The run's state, validated; FileNotFoundError if there is none, StateFileError if invalid."""
    path = path_for(run_id)
    if not os.path.lexists(path):
        raise FileNotFoundError(str(path))
    return _read_checked(path)


def read(run_id: str) -> dict | None:
    """The run's state if a valid one exists, else None."""
    try:
        return load(run_id)
    except (OSError, StateFileError):
        return None


def write(run_id: str, data: dict) -> None:
    """Replace the run's state file atomically (``data`` must be valid)."""
    validate(run_id, data)
    with _lock:
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        tmp = STATE_DIR / f".{run_id}.json.tmp-{os.getpid()}-{threading.get_native_id()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, json.dumps(data, indent=2, sort_keys=True).encode())
        finally:
            os.close(fd)
        os.replace(tmp, path_for(run_id))


def add(run_id: str, *, purpose: str = "run", info: dict | None = None, **resources: list) -> dict:
    """Add resources to the run's state file (created, owned by this process, if absent) — call it
    *before* creating them. ``info``: descriptive fields (sites, links...) to set."""
    with _lock:
        try:
            data = load(run_id)
        except FileNotFoundError:
            data = record(run_id, purpose=purpose)
        except StateFileError as e:  # a file of that name that is not ours: never overwritten
            raise StateFileError(f"{path_for(run_id)}: {e}; not a testbed state file, left alone "
                                 "(remove it or try again)") from None
        for key, items in resources.items():
            if key not in RESOURCE_KEYS:
                raise KeyError(f"unknown resource list {key!r}")
            have = data.setdefault(key, [])
            for item in items:
                item = int(item) if key == "pids" else str(item)
                if item not in have:
                    have.append(item)
        data.update(info or {})
        write(run_id, data)
        return data


def discard(run_id: str, **resources: list) -> None:
    """Forget removed resources; the file goes when it lists nothing any more."""
    with _lock:
        data = read(run_id)
        if data is None:
            return
        for key, items in resources.items():
            gone = {int(i) if key == "pids" else str(i) for i in items}
            data[key] = [x for x in data.get(key, []) if x not in gone]
        if any(data.get(k) for k in RESOURCE_KEYS):
            write(run_id, data)
        else:
            remove(run_id)


@contextmanager
def listed(run_id: str | None, *, purpose: str = "run", **resources: list) -> Iterator[None]:
    """List ``resources`` in the run's state file for the block (before the block creates them);
    forget them after it (the block removed them). ``run_id`` None: nothing is recorded."""
    if run_id is None:
        yield
        return
    add(run_id, purpose=purpose, **resources)
    try:
        yield
    finally:
        discard(run_id, **resources)


def remove(run_id: str) -> None:
    with _lock:
        path_for(run_id).unlink(missing_ok=True)


def scan() -> tuple[dict[str, dict], list[Stray]]:
    """Every valid state file (by run id) and every other entry of the state directory, with why it
    is not one. Never raises for what it finds."""
    runs: dict[str, dict] = {}
    strays: list[Stray] = []
    try:
        entries = sorted(os.scandir(STATE_DIR), key=lambda e: e.name)
    except FileNotFoundError:
        return runs, strays
    except OSError as e:
        return runs, [Stray(STATE_DIR, f"cannot be listed: {e.strerror}")]
    for entry in entries:
        path = Path(entry.path)
        if _is_temp_name(entry.name) or entry.name.startswith(TCP_ALLOWED_LEDGER):
            continue  # a write in progress (or cut short: `clean --run` removes it)
        try:
            data = _read_checked(path)
        except StateFileError as e:
            strays.append(Stray(path, str(e)))
            continue
        runs[data["run_id"]] = data
    return runs, strays


def _is_temp_name(name: str) -> bool:
    head, _, _ = name.partition(".json.tmp-")
    return name.startswith(".") and ".json.tmp-" in name and bool(RUN_ID_RE.match(head[1:]))


def temp_files(run_id: str) -> list[Path]:
    """Interrupted writes of this run's state file."""
    try:
        return [Path(e.path) for e in os.scandir(STATE_DIR)
                if e.name.startswith(f".{run_id}.json.tmp-") and e.is_file(follow_symlinks=False)]
    except OSError:
        return []


def all_runs() -> list[str]:
    """Run ids with a valid state file."""
    return sorted(scan()[0])


def pid_alive(pid: int) -> bool:
    """Running (a zombie has exited: it counts as dead)."""
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True


def owner_alive(data: dict) -> bool:
    """The process that wrote the state file is still running (not a later process with its PID)."""
    pid = int(data.get("owner_pid", 0))
    if pid <= 0 or not pid_alive(pid):
        return False
    started = data.get("owner_started")
    now = _owner_started(pid)
    return started is None or now is None or abs(now - float(started)) < 1.0


def pid_cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
