"""The TCP congestion control the sites' stacks use: one name per fabric, set as each site
namespace's default (``net.ipv4.tcp_congestion_control``), so every TCP flow a site opens (iperf3,
agents, checkpoint transfers) uses it unless the program picks its own (``TCP_CONGESTION``).

Why it is set, not inherited: a new namespace takes the machine's default, which differs between
machines (Linux builds default to cubic; some kernels, this project's CI machine among them, to bbr),
and the two carry a long fat link differently: bbr (v1) drops its window to 4 packets for 200 ms
whenever its minimum RTT has not been seen again for 10 s (ProbeRTT), about 2.5 % of a 10 Gbit/s,
50 ms link's goodput. ``host`` keeps the machine's default.

The kernel lets a namespace other than the first default only to a congestion control in the
machine-wide ``tcp_allowed_congestion_control`` list. Where the chosen one is not in it, it is added
there, and the addition is noted in a ledger (``<state dir>/.host-tcp-allowed.json``, under a lock on
the state directory) before it is made, with the runs that need it; when the last of them is torn down (or cleaned),
the name is taken off the list again. Names the list had already are never touched.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
from pathlib import Path
from typing import Iterator

PROC_IPV4 = Path("/proc/sys/net/ipv4")
HOST = "host"
DEFAULT = "cubic"
NAME_RE = re.compile(r"^[a-z0-9_]{1,15}$")  # the kernel's TCP_CA_NAME_MAX is 16 with the NUL


def _read_list(name: str) -> list[str]:
    try:
        return (PROC_IPV4 / name).read_text().split()
    except OSError:
        return []


def available() -> list[str]:
    """Congestion controls this kernel has loaded (built in or as modules already loaded)."""
    return _read_list("tcp_available_congestion_control")


def allowed() -> list[str]:
    """The machine-wide list a namespace may default to."""
    return _read_list("tcp_allowed_congestion_control")


def host_default() -> str | None:
    names = _read_list("tcp_congestion_control")
    return names[0] if names else None


def effective(name: str) -> str | None:
    """The congestion control a site's flows get with setting ``name``."""
    return host_default() if name == HOST else name


def problem(name: str) -> str | None:
    """Why ``name`` cannot be the sites' congestion control here; None when it can."""
    if name == HOST:
        return None
    if not NAME_RE.match(name):
        return f"{name!r} is not a congestion control name (lower-case letters, digits, _; or {HOST!r})"
    have = available()
    if have and name not in have:
        return (f"{name!r} is not available in this kernel (available: {' '.join(have)}); load its module "
                f"(modprobe tcp_{name}) or choose one of those, or {HOST!r} for the machine's default")
    return None


def check(name: str, field: str) -> str:
    """``name``, or :class:`SpecError` naming ``field`` when it cannot be used here."""
    from testbed.errors import SpecError

    if why := problem(name):
        raise SpecError([(field, why)])
    return name


def ledger_path() -> Path:
    from testbed.netem.owned import state

    return state.STATE_DIR / state.TCP_ALLOWED_LEDGER


@contextlib.contextmanager
def _ledger() -> Iterator[dict[str, list[str]]]:
    """The ledger {name added to the allowed list: [runs that need it]}, for the block, under a lock
    on the state directory (other testbed processes wait); written back after it, removed when empty."""
    path = ledger_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        data = _read_ledger(path)
        yield data
        _write_ledger(path, data)
    finally:
        os.close(fd)  # releases the lock


def _read_ledger(path: Path) -> dict[str, list[str]]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): [str(r) for r in v] for k, v in data.items() if isinstance(v, list)}


def _write_ledger(path: Path, data: dict) -> None:
    if not data:
        path.unlink(missing_ok=True)
        return
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True))
    os.replace(tmp, path)


def _write_allowed(names: list[str]) -> None:
    (PROC_IPV4 / "tcp_allowed_congestion_control").write_text(" ".join(names))


def acquire(run_id: str, name: str) -> bool:
    """Make ``name`` a default new namespaces may take, for run ``run_id`` (noted before it is
    changed); True when the machine-wide list was changed now."""
    if name == HOST:
        return False
    with _ledger() as ledger:
        have = allowed()
        if name in have and name not in ledger:
            return False  # the machine allows it already: nothing of ours to undo
        runs = ledger.setdefault(name, [])
        if run_id not in runs:
            runs.append(run_id)
        if name in have:
            return False  # added for another run of ours: shared, given back after the last
        # noted first: a crash right after leaves a ledger entry that `testbed clean` resolves
        _write_ledger(ledger_path(), ledger)
        _write_allowed(have + [name])
        return True


def release(run_id: str | None) -> list[str]:
    """Run ``run_id`` is gone (None: none is, notes of runs without a state file are dropped): take
    off the allowed list each name testbed added that no run with a state file still needs (the
    machine's default is never taken off); returns the names taken off."""
    from testbed.netem.owned import state

    if not ledger_path().exists():
        return []
    removed = []
    with _ledger() as ledger:
        for name, runs in list(ledger.items()):
            still = [r for r in runs if r != run_id and state.read(r) is not None]
            if still:
                ledger[name] = still
                continue
            del ledger[name]
            have = allowed()
            if name in have and name != host_default():
                _write_allowed([n for n in have if n != name])
                removed.append(name)
    return removed
