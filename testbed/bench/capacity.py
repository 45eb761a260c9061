"""What one emulated link can carry on this machine, for ``testbed net status``.

Measured where ``testbed bench shaping`` has run (its ``shaping.json``: the unshaped goodput of a
veth pair through testbed's transfer service and through iperf3; the larger is what the kernel
can give one link), else testbed's own conservative defaults (:mod:`testbed.netem.scaling`).
Traffic through the userspace delay relay (links with latency where the kernel has no netem) is
also bounded by the relay: what the bench measured it to carry here
(:mod:`testbed.netem.dataplane_capacity`), else its default.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from testbed.recorder.out_dir import results_root

DEFAULT_BENCH_FILE = results_root() / "bench" / "shaping.json"


@dataclass(frozen=True)
class Capacity:
    mbit: float
    source: str  # what the number is: measured by bench shaping, or testbed's default

    def over(self, rate_mbit: float) -> bool:
        return rate_mbit > self.mbit


def measured_unshaped_mbit(bench_file: Path) -> float | None:
    """The unshaped goodput ``bench shaping`` recorded (the better of its two tools), or None."""
    try:
        data = json.loads(Path(bench_file).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    rows = data.get("goodput") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        return None
    best = None
    for row in rows:
        if not isinstance(row, dict) or row.get("configured_mbit") is not None:
            continue
        for key in ("transfer_service_mbit", "iperf3_mbit"):
            v = row.get(key)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0:
                best = max(best or 0.0, float(v))
    return best


def link_capacity(impairment: str | None, delayed: bool, bench_file: Path | None = None) -> Capacity:
    """What a link of a network with ``impairment`` can carry here; ``delayed``: its traffic goes
    through the delay relay (it has latency, jitter or loss and the impairment is the relay)."""
    from testbed.netem.scaling import CAPACITY_MBIT_DIRECT, CAPACITY_MBIT_RELAY

    bench_file = bench_file or DEFAULT_BENCH_FILE
    measured = measured_unshaped_mbit(bench_file)
    if measured is not None:
        cap = Capacity(measured, f"measured unshaped by testbed bench shaping ({bench_file})")
    else:
        cap = Capacity(CAPACITY_MBIT_DIRECT, "testbed's default; run `testbed bench shaping` to measure this machine")
    if impairment == "relay" and delayed:
        from testbed.netem.dataplane_capacity import relay_capacity

        relay = relay_capacity(CAPACITY_MBIT_RELAY)
        if cap.mbit > relay.mbit:
            cap = Capacity(relay.mbit, f"the userspace delay relay (this kernel has no netem): {relay.source}")
    return cap
