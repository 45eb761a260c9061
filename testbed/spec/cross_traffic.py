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
import io
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
    rate_gbps: float = Field(gt=0, description=(
        "A paced UDP stream at this rate (scenario Gbit/s), for the whole run; at most the link's rate in that direction."))


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
        "A CSV file: columns t_s (scenario seconds) and flows (bulk TCP flows from then on), optionally udp_gbps; the "
        "first row's value holds before its time. A relative path is looked for beside the scenario file, then in the "
        "folder above it, then among the files testbed ships."))

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


TRACE_COLUMNS = ("t_s", "flows")
"""The columns a cross-traffic trace must have (``udp_gbps`` is optional)."""


_BOM = b"\xef\xbb\xbf"


def _rows(path: str | Path) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """The header's column names (a UTF-8 byte-order mark and spaces around each name removed) and
    the non-blank rows with their line numbers. Every failure is a :class:`LoadTraceError` naming
    the file (and line) but never quoting it."""
    try:
        raw = Path(path).read_bytes()
    except OSError as e:
        raise LoadTraceError(f"{path}: cannot read it ({e.strerror or type(e).__name__})") from None
    skip = len(_BOM) if raw.startswith(_BOM) else 0  # a spreadsheet's byte-order mark is no part of the first name
    try:
        text = raw[skip:].decode("utf-8")
    except UnicodeDecodeError as e:
        at = skip + e.start
        line = raw.count(b"\n", 0, at) + 1
        raise LoadTraceError(f"{path}: line {line}: not UTF-8 text (byte {at + 1})") from None
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)  # a stray or unclosed quote: an error
    header: list[str] | None = None
    rows: list[tuple[int, list[str]]] = []
    try:
        for row in reader:
            if not any(cell.strip() for cell in row):
                continue  # a blank line (or only commas)
            if header is None:
                header = [name.strip() for name in row]
            else:
                rows.append((reader.line_num, row))
    except csv.Error as e:  # the csv module's messages name no content (a field limit, a NUL, a quote)
        raise LoadTraceError(f"{path}: line {reader.line_num}: not valid CSV ({e})") from None
    return header or [], rows


def read_load_trace(path: str | Path) -> LoadTrace:
    """Read a cross-traffic CSV (``t_s,flows[,udp_gbps]``, times increasing, flows >= 0 integers).
    UTF-8 text, with or without a byte-order mark; spaces around the header's names are ignored,
    and so are blank lines. Errors name the file, the line and the column, never the file's text."""
    times, flows, udp = [], [], []
    cols, rows = _rows(path)
    missing = [c for c in TRACE_COLUMNS if c not in cols]
    if missing:
        has = f"its header has {len(cols)} column(s)" if cols else "the file is empty"
        raise LoadTraceError(f"{path}: needs columns {' and '.join(TRACE_COLUMNS)} in its header; "
                             f"missing {' and '.join(missing)} ({has})")
    at = {name: cols.index(name) for name in (*TRACE_COLUMNS, "udp_gbps") if name in cols}

    def number(row: list[str], n: int, name: str) -> float:
        try:
            return float(row[at[name]])
        except ValueError:
            raise LoadTraceError(f"{path}: line {n}: {name} is not a number") from None

    for n, row in rows:
        if len(row) != len(cols):
            raise LoadTraceError(f"{path}: line {n}: has {len(row)} field(s) where the header has {len(cols)}")
        t, k = number(row, n, "t_s"), number(row, n, "flows")
        u = number(row, n, "udp_gbps") if "udp_gbps" in at and row[at["udp_gbps"]].strip() else 0.0
        if not (math.isfinite(t) and math.isfinite(k) and math.isfinite(u)):
            raise LoadTraceError(f"{path}: line {n}: not a finite number")
        if k < 0 or k != int(k) or k > MAX_FLOWS:
            raise LoadTraceError(f"{path}: line {n}: flows must be an integer in [0, {MAX_FLOWS}]")
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


def trace_not_found(name: str, base_dir: Path) -> str:
    """The message for a ``trace:`` found nowhere: the absolute paths it was looked for at
    (:func:`testbed.spec.files.looked_for`)."""
    from testbed.spec.files import NOT_FOUND, looked_for

    return f"{NOT_FOUND}: {name} ({looked_for(name, base_dir)})"


def on_off_phases(n_flows: int, period_s: float, seed: int, key: Sequence[object]) -> "np.ndarray":
    """Each on/off flow's phase (seconds into its period at t = 0), seeded by the run's seed and the
    entry: the sim and the emulation draw the same ones."""
    from testbed.seeding import rng

    return rng(seed, "cross-traffic-on-off", *key).uniform(0.0, period_s, n_flows)
