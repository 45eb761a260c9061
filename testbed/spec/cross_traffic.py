"""Cross-traffic on a WAN link: other flows that a migration's transfer meets (issue #33).

One entry per link *direction* (``src`` -> ``dst``; the sites must share a link). Each entry may
combine several kinds of load; all rates, sizes and times are in scenario units (the emulated
substrates scale them like the link itself: rate x byte_scale x time_scale, sizes x byte_scale,
times / time_scale):

- ``tcp``: ``flows`` long-lived bulk TCP flows (congestion control: the sites', or ``congestion``);
- ``udp``: a constant-rate, paced UDP stream of ``rate_gbps``;
- ``on_off``: ``flows`` bulk TCP flows, each on for ``on_s`` then off for ``off_s`` (a seeded phase per flow);
- ``poisson``: TCP flows arriving as a Poisson process (``arrivals_per_s``), each of a Pareto
  (heavy-tailed) size with mean ``mean_size_mb`` and shape ``pareto_shape``;
- ``trace``: a CSV file with columns ``t_s`` and ``flows`` (bulk TCP flows from that time on) and
  optionally ``udp_gbps``: load that changes over the run.

Instead of a list, ``cross_traffic`` may name a load level (:data:`LOAD_PRESETS`): the same entries
on every direction of every link, rates relative to that direction's bandwidth B (see
:func:`preset_entries`), so that a sweep can vary the load of a whole scenario by one value.

The sim substrate models each entry (:mod:`testbed.crosstraffic.model`); netns and mininet
generate it as real traffic from the sites' namespaces (:mod:`testbed.netem.crosstraffic`).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from pydantic import Field, model_validator

from testbed.spec.base import Strict
from testbed.spec.topology import SiteName

MAX_FLOWS = 64
"""Most concurrent generated flows per entry and kind (each is a socket in a generator process)."""


class TcpFlows(Strict):
    flows: int = Field(ge=1, le=MAX_FLOWS, description="Number of long-lived bulk TCP flows, for the whole run.")
    congestion: str | None = Field(None, pattern=r"^[a-z0-9_]{1,15}$", description=(
        "Their TCP congestion control (cubic, bbr, reno, ...); default: the sites' (emulation.tcp_congestion)."))


class UdpLoad(Strict):
    rate_gbps: float = Field(gt=0, description="A paced UDP stream at this rate (scenario Gbit/s), for the whole run.")


class OnOff(Strict):
    flows: int = Field(ge=1, le=MAX_FLOWS, description="Number of on/off bulk TCP flows.")
    on_s: float = Field(gt=0, description="Seconds each flow sends (scenario time).")
    off_s: float = Field(gt=0, description="Seconds each flow pauses between two on periods (scenario time).")


class PoissonFlows(Strict):
    arrivals_per_s: float = Field(gt=0, le=1000, description="Mean flow arrivals per scenario second (Poisson process).")
    mean_size_mb: float = Field(gt=0, description="Mean flow size in MB (1e6 bytes), scenario bytes.")
    pareto_shape: float = Field(1.5, gt=1, le=10, description=(
        "Shape of the Pareto size distribution (heavy-tailed; the mean is finite above 1, the variance above 2)."))
    max_flows: int = Field(MAX_FLOWS, ge=1, le=MAX_FLOWS, description="Most flows open at once (an arrival beyond it waits).")


class CrossTraffic(Strict):
    """Background traffic on one link direction while the run goes."""

    src: SiteName = Field(description="The site the cross-traffic is sent from (one end of a link).")
    dst: SiteName = Field(description="The site it is sent to (the other end of that link).")
    tcp: TcpFlows | None = Field(None, description="Long-lived bulk TCP flows.")
    udp: UdpLoad | None = Field(None, description="A constant-rate UDP stream.")
    on_off: OnOff | None = Field(None, description="Bulk TCP flows that switch on and off.")
    poisson: PoissonFlows | None = Field(None, description="Poisson flow arrivals with heavy-tailed (Pareto) sizes.")
    trace: str | None = Field(None, min_length=1, max_length=4096, description=(
        "A CSV file (relative to the scenario file): columns t_s (scenario seconds) and flows (bulk TCP flows from "
        "then on), optionally udp_gbps; the first row's value holds before its time."))

    @model_validator(mode="after")
    def _some_load(self) -> "CrossTraffic":
        if self.src == self.dst:
            raise ValueError(f"src and dst must differ (both are {self.src!r})")
        if not any((self.tcp, self.udp, self.on_off, self.poisson, self.trace)):
            raise ValueError("give at least one of tcp, udp, on_off, poisson, trace")
        return self

    @property
    def key(self) -> tuple[str, str]:
        return (self.src, self.dst)


# ------------------------------------------------------------------------------- load levels

LOAD_PRESETS: dict[str, str] = {
    "none": "no cross-traffic",
    "light": "1 bulk TCP flow",
    "heavy": "3 bulk TCP flows and paced UDP at 0.1 B",
    "bursty": ("4 on/off TCP flows (600 s on, 1800 s off) and Poisson flows of Pareto(1.5) sizes, mean 200 MB, "
               "arriving at 0.2 x B (Gbit/s) per second: an offered load of 0.32 B"),
}
"""The named load levels ``cross_traffic`` may be set to: what each puts on every link direction of
bandwidth B (Gbit/s, that direction's rate)."""


def preset_entries(preset: str, links: Sequence[object]) -> list[dict]:
    """The cross-traffic entries of a named load level on every direction of ``links`` (objects or
    mappings with ``a``, ``b``, ``bandwidth_gbps`` and optionally ``bandwidth_b_to_a_gbps``).
    Raises ValueError for an unknown level."""
    if preset not in LOAD_PRESETS:
        raise ValueError(f"unknown load level {preset!r} (a list of entries, or one of: {', '.join(LOAD_PRESETS)})")

    def get(link: object, name: str) -> object:
        return link.get(name) if isinstance(link, dict) else getattr(link, name, None)

    out: list[dict] = []
    if preset == "none":
        return out
    for link in links:
        a, b, ab = get(link, "a"), get(link, "b"), get(link, "bandwidth_gbps")
        ba = get(link, "bandwidth_b_to_a_gbps") or ab
        for src, dst, gbps in ((a, b, ab), (b, a, ba)):
            e: dict = {"src": src, "dst": dst}
            if preset == "light":
                e["tcp"] = {"flows": 1}
            elif preset == "heavy":
                e["tcp"] = {"flows": 3}
                e["udp"] = {"rate_gbps": 0.1 * float(gbps)}
            else:  # bursty
                e["on_off"] = {"flows": 4, "on_s": 600, "off_s": 1800}
                e["poisson"] = {"arrivals_per_s": 0.2 * float(gbps), "mean_size_mb": 200, "pareto_shape": 1.5}
            out.append(e)
    return out


# ------------------------------------------------------------------------------- trace files and schedules


@dataclass(frozen=True)
class LoadTrace:
    """A cross-traffic CSV trace: step-hold ``flows`` and ``udp_gbps`` from ``times_s`` on."""

    times_s: tuple[float, ...]
    flows: tuple[int, ...]
    udp_gbps: tuple[float, ...]

    def at(self, t_s: float) -> tuple[int, float]:
        import bisect

        i = max(0, bisect.bisect_right(self.times_s, t_s) - 1)
        return self.flows[i], self.udp_gbps[i]


class LoadTraceError(ValueError):
    pass


def read_load_trace(path: str | Path) -> LoadTrace:
    """Read a cross-traffic CSV (``t_s,flows[,udp_gbps]``, times increasing, flows >= 0 integers)."""
    times, flows, udp = [], [], []
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        cols = reader.fieldnames or []
        if "t_s" not in cols or "flows" not in cols:
            raise LoadTraceError(f"{path}: needs columns t_s and flows (has {', '.join(cols) or 'none'})")
        for n, row in enumerate(reader, start=2):
            try:
                t, k = float(row["t_s"]), float(row["flows"])
                u = float(row["udp_gbps"]) if row.get("udp_gbps") not in (None, "") else 0.0
            except ValueError:
                raise LoadTraceError(f"{path}: line {n}: not a number") from None
            if not (math.isfinite(t) and math.isfinite(k) and math.isfinite(u)):
                raise LoadTraceError(f"{path}: line {n}: not a finite number")
            if k < 0 or k != int(k) or k > 64:
                raise LoadTraceError(f"{path}: line {n}: flows must be an integer in [0, 64]")
            if u < 0:
                raise LoadTraceError(f"{path}: line {n}: udp_gbps must be >= 0")
            if times and t <= times[-1]:
                raise LoadTraceError(f"{path}: line {n}: t_s must increase")
            times.append(t)
            flows.append(int(k))
            udp.append(u)
    if not times:
        raise LoadTraceError(f"{path}: no rows")
    return LoadTrace(tuple(times), tuple(flows), tuple(udp))


def on_off_phases(n_flows: int, period_s: float, seed: int, key: Sequence[object]) -> "np.ndarray":
    """Each on/off flow's phase (seconds into its period at t = 0), seeded by the run's seed and the
    entry: the sim and the emulation draw the same ones."""
    from testbed.seeding import rng

    return rng(seed, "cross-traffic-on-off", *key).uniform(0.0, period_s, n_flows)
