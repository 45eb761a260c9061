"""Time and byte scale of an emulated run (pure).

With time scale T (scenario seconds per wall second) and byte scale b (bytes sent per scenario
byte), a scenario link of B Gbit/s becomes a wall-clock rate of ``B x b x T`` and a one-way
latency L becomes ``L / T``: transfer times scale by exactly 1/T, and the number of
bandwidth-delay products per checkpoint (``b S / (B b T x L / T)`` = S / (B L)) is preserved.
``byte_scale: auto`` picks the largest b <= 1 for which the fastest link fits the machine's
shaping capacity: with the delay relay, what ``testbed bench shaping`` measured it to carry here
(:mod:`testbed.netem.dataplane_capacity`), else the defaults below.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from testbed.errors import SpecError
from testbed.link import DirectedLink
from testbed.netem.qdisc import MIN_RATE_MBIT

if TYPE_CHECKING:  # pragma: no cover  (the fabric's modules load without pydantic)
    from testbed.spec.scenario import Scenario

# Wall-clock goodput this machine shapes accurately (measured by `testbed bench shaping`: tbf accurate to 5 Gbit/s; the
# Python delay relay carries ~730 Mbit/s). Conservative defaults; `testbed bench shaping` measures
# the relay's (cached: testbed.netem.dataplane_capacity).
CAPACITY_MBIT_DIRECT = 2000.0
CAPACITY_MBIT_RELAY = 500.0


@dataclass(frozen=True)
class Scaling:
    time_scale: float
    byte_scale: float
    capacity_mbit: float
    byte_scale_source: str  # "scenario" | "auto"
    capacity_source: str = ""  # where capacity_mbit comes from (measured by the bench, or a default)

    def rate_mbit(self, bandwidth_gbps: float) -> float:
        return max(MIN_RATE_MBIT, bandwidth_gbps * 1000.0 * self.byte_scale * self.time_scale)

    def delay_ms(self, latency_ms: float) -> float:
        return latency_ms / self.time_scale

    def wall_s(self, scenario_s: float) -> float:
        return scenario_s / self.time_scale

    def scenario_s(self, wall_s: float) -> float:
        return wall_s * self.time_scale

    def bytes_sent(self, size_gb: float) -> int:
        return max(1, int(round(size_gb * 1e9 * self.byte_scale)))

    def to_dict(self) -> dict:
        return {"time_scale": self.time_scale, "byte_scale": self.byte_scale, "capacity_mbit": self.capacity_mbit,
                "byte_scale_source": self.byte_scale_source, "capacity_source": self.capacity_source,
                "latency_scale": 1.0 / self.time_scale, "rate_scale": self.byte_scale * self.time_scale}


def choose_scaling(sc: "Scenario", *, capacity_mbit: float, links: Sequence[DirectedLink] | None = None,
                   capacity_source: str = "") -> Scaling:
    """The run's scaling from the directed links it shapes (default: the scenario's, both directions),
    so that the fastest link is the fastest one the fabric is built from. ``capacity_source``: where
    ``capacity_mbit`` comes from (recorded with the scaling)."""
    t = sc.emulation.time_scale
    if links is None:
        from testbed.spec.topology import directed_links

        links = directed_links(sc.sites, sc.links)
    fastest_gbps = max((link.bandwidth_gbps for link in links), default=0.0)
    need_mbit = fastest_gbps * 1000.0 * t
    if sc.emulation.byte_scale == "auto":
        b = min(1.0, capacity_mbit / need_mbit) if need_mbit > 0 else 1.0
        return Scaling(t, b, capacity_mbit, "auto", capacity_source)
    b = float(sc.emulation.byte_scale)
    if need_mbit * b > capacity_mbit * 1.0001:
        raise SpecError([("emulation.byte_scale", (
            f"{b:g} x time_scale {t:g} puts the fastest link ({fastest_gbps:g} Gbit/s) at {need_mbit * b:.0f} Mbit/s "
            f"wall clock, above this machine's shaping capacity ({capacity_mbit:.0f} Mbit/s); use 'auto' or "
            f"<= {capacity_mbit / need_mbit:.3g}"))])
    return Scaling(t, b, capacity_mbit, "scenario", capacity_source)
