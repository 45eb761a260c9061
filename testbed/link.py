"""One direction of a network link: the value object every layer shares (a leaf: imports nothing).

A scenario's or topology's links (``testbed.spec.topology.directed_links``) give two each, in the
YAML's names and units; an emulated run scales them to wall clock (``testbed.netem.scaling``) and one
builder makes a fabric's links from them (``testbed.netem.links.fabric_links``). Round-trip time is
computed here only: :func:`rtt_ms`.
"""

from __future__ import annotations

from dataclasses import dataclass


def rtt_ms(latency_ms: float) -> float:
    """Round-trip time over a path with one-way latency ``latency_ms`` each way (RTT = 2 x latency):
    the one place this is computed."""
    return 2.0 * latency_ms


@dataclass(frozen=True)
class DirectedLink:
    """src -> dst: bandwidth (Gbit/s), one-way latency, jitter (ms) and loss (%), as the YAML names them."""

    src: str
    dst: str
    bandwidth_gbps: float
    latency_ms: float = 0.0
    jitter_ms: float = 0.0
    loss_pct: float = 0.0
    queue: str = "fair"  # "fair" (a per-flow fair queue under the shaper) or "fifo"

    @property
    def key(self) -> tuple[str, str]:
        return (self.src, self.dst)

    @property
    def rtt_ms(self) -> float:
        return rtt_ms(self.latency_ms)
