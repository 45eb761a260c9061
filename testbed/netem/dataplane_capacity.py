"""What one relayed link carries accurately on this machine: measured by ``testbed bench shaping``
(its data-plane part) and cached, so ``byte_scale: auto`` fits links to the relay that will run.

The cache (``/var/cache/testbed/dataplane-capacity.json``, or ``$TESTBED_DATAPLANE_CACHE``) holds
the capacity, when and by what it was measured, and what it is valid for: this host and kernel,
and the relay implementation that was measured (the compiled relay by its source's SHA-256, or the
Python relay). A cache written for another machine, kernel or relay build is ignored (its reason
is in :attr:`RelayCapacity.source`) and the conservative default applies.

Capacity from a bench run (:func:`capacity_from_rows`, pure): over the relay's TCP rows with the
idle RTT in target, the largest configured rate it carried accurately (goodput >= 0.94 x
configured), else 0.94 x the most it carried (a link configured there asks for no more than that row
delivered: the most a row carried is the relay's limit at that moment, not a rate it keeps
accurately); never above the unshaped veth's goodput measured in the same run.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from testbed.netem import tcp_cc

CACHE_ENV = "TESTBED_DATAPLANE_CACHE"
DEFAULT_CACHE = Path("/var/cache/testbed/dataplane-capacity.json")
ACCURATE_RATIO = 0.94  # goodput / configured: what "carried accurately" means (bench shaping's target)
SCHEMA = 1


@dataclass(frozen=True)
class RelayCapacity:
    mbit: float
    source: str  # what the number is: measured (when, by what), or the default and why


def cache_path() -> Path:
    return Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE)


def machine() -> dict:
    """What a measurement is valid for besides the relay: this host and kernel."""
    u = os.uname()
    return {"host": u.nodename, "kernel": u.release}


def relay_identity() -> dict:
    """The relay the fabric would run now: the compiled relay (its source's SHA-256) or the Python relay."""
    from testbed.netem.relay import fastrelay

    if fastrelay.available():
        return {"implementation": "fast", "source_sha256": hashlib.sha256(fastrelay.SOURCE.read_bytes()).hexdigest()}
    return {"implementation": "python"}


def capacity_from_rows(tcp_rows: list[dict], implementation: str) -> float | None:
    """Capacity (Mbit/s) from ``relay_dataplane`` TCP rows: see the module doc. None when the
    implementation has no usable row."""
    best = None
    for row in tcp_rows:
        if row.get("implementation") != implementation or not row.get("rtt_within_target"):
            continue
        if row.get("tcp_congestion", tcp_cc.DEFAULT) != tcp_cc.DEFAULT:  # runs use the default
            continue
        configured, got = row.get("configured_mbit"), row.get("actual_goodput_mbit")
        if not configured or not got:
            continue
        carried = configured if got >= ACCURATE_RATIO * configured else ACCURATE_RATIO * min(configured, got)
        best = carried if best is None else max(best, carried)
    ceiling = [r["actual_goodput_mbit"] for r in tcp_rows
               if r.get("implementation") == "unshaped" and r.get("actual_goodput_mbit")]
    if best is not None and ceiling:
        best = min(best, max(ceiling))
    return best


def record(dataplane: dict, *, path: Path | None = None, command: str = "testbed bench shaping",
           now: float | None = None) -> dict | None:
    """Write the cache from a ``relay_dataplane.run()`` result for the relay that would run now;
    returns what was written (None when the result has no usable row for it: nothing is written)."""
    ident = relay_identity()
    mbit = capacity_from_rows(dataplane.get("tcp", []), ident["implementation"])
    if mbit is None:
        return None
    entry = {"schema": SCHEMA, "capacity_mbit": mbit, **ident, **machine(),
             "measured_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)), "measured_by": command,
             "rule": f"largest configured rate carried at >= {ACCURATE_RATIO} x with idle RTT in target, "
                     f"else {ACCURATE_RATIO} x the most carried; at most the unshaped veth"}
    path = path or cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        tmp.write_text(json.dumps(entry, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return entry


def read(path: Path | None = None) -> tuple[dict | None, str]:
    """The cached entry valid here and for the relay that would run now, or ``(None, why not)``."""
    path = path or cache_path()
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None, f"not measured on this machine ({path} missing; `testbed bench shaping --only dataplane` measures it)"
    except (OSError, ValueError, RecursionError) as e:
        return None, f"{path} unreadable ({type(e).__name__})"
    if not isinstance(entry, dict) or entry.get("schema") != SCHEMA:
        return None, f"{path}: not a capacity record of this testbed version"
    mbit = entry.get("capacity_mbit")
    if isinstance(mbit, bool) or not isinstance(mbit, (int, float)) or not mbit > 0:
        return None, f"{path}: capacity_mbit is not a positive number"
    for key, want in {**machine(), **relay_identity()}.items():
        if entry.get(key) != want:
            what = "relay build" if key == "source_sha256" else key
            return None, f"{path} was measured for another {what} ({entry.get(key)!r}, here {want!r})"
    return entry, str(path)


def relay_capacity(default_mbit: float, path: Path | None = None) -> RelayCapacity:
    """What one relayed link carries accurately here: the cached measurement, else ``default_mbit``."""
    entry, why = read(path)
    if entry is None:
        return RelayCapacity(default_mbit, f"default {default_mbit:g} Mbit/s: {why}")
    impl = "compiled relay" if entry["implementation"] == "fast" else "Python relay"
    return RelayCapacity(float(entry["capacity_mbit"]),
                         f"measured for the {impl} on {entry.get('measured_utc')} by `{entry.get('measured_by')}` ({why})")
