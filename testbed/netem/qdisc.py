"""Qdisc parameters (pure, testable without root) and their application with pyroute2.

Bandwidth: a tbf at the root of the sender-side WAN interface, changed *in place* (``tc change``)
when a trace step or a degradation event says so — never deleted and re-added.
Burst is never below 256 KiB where the link carries GSO super-frames (offloads on): TCP hands the
qdisc GSO packets of up to 64 KiB (more with BIG TCP), which the tbf must hold whole or cut up.
On the links of a frame-mode relay, whose offloads are off so that every frame on the wire is
MTU-sized anyway, the floor is :data:`MIN_BURST_FRAME_BYTES`: the tbf cuts a larger GSO packet into
frames as it queues it, and a transfer of a few hundred kB is shaped rather than sent at line rate
out of a full bucket. A packet queued under a larger burst never fits a smaller one (the flow would
stall for good), so :func:`change_rate` never shrinks a small burst below the one the kernel holds.
The queue limit holds at least the path's bandwidth-delay product so TCP can fill the link.

Where the kernel has netem, delay/jitter/loss go in a root netem qdisc with the tbf as its child
(handle ``2:``); elsewhere they come from the userspace relay and the tbf is the root (``1:``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from testbed.link import rtt_ms

MIN_BURST_BYTES = 256 * 1024
MIN_BURST_FRAME_BYTES = 16 * 1514  # 16 full Ethernet frames: the floor where no frame exceeds the MTU
BURST_S = 0.004  # burst covers 4 ms at line rate (hrtimer-friendly at 10 Gbit/s)
MIN_QUEUE_S = 0.05
MAX_RATE_MBIT = 34_000  # tbf's 32-bit rate field (bytes/s) without TCA_TBF_RATE64
MIN_RATE_MBIT = 0.1


@dataclass(frozen=True)
class TbfParams:
    rate_bytes_s: int
    burst_bytes: int
    limit_bytes: int

    @property
    def rate_mbit(self) -> float:
        return self.rate_bytes_s * 8 / 1e6


def tbf_params(rate_mbit: float, rtt_ms: float = 0.0, *, mtu_frames: bool = False) -> TbfParams:
    """tbf for ``rate_mbit``; queue >= max(2 x RTT, 50 ms) of traffic so TCP can fill the pipe.
    ``mtu_frames``: every frame on the link is MTU-sized (offloads off), so the burst may be as
    small as :data:`MIN_BURST_FRAME_BYTES` (module doc)."""
    if not MIN_RATE_MBIT <= rate_mbit <= MAX_RATE_MBIT:
        raise ValueError(f"rate {rate_mbit} Mbit/s outside [{MIN_RATE_MBIT}, {MAX_RATE_MBIT}]")
    if rtt_ms < 0:
        raise ValueError("rtt_ms must be >= 0")
    rate = int(round(rate_mbit * 1e6 / 8))
    burst = max(MIN_BURST_FRAME_BYTES if mtu_frames else MIN_BURST_BYTES, int(rate * BURST_S))
    queue_s = max(MIN_QUEUE_S, 2 * rtt_ms / 1000.0)
    return TbfParams(rate_bytes_s=rate, burst_bytes=burst, limit_bytes=burst + max(MIN_BURST_BYTES, int(rate * queue_s)))


@dataclass(frozen=True)
class NetemParams:
    delay_us: int
    jitter_us: int
    loss_pct: float
    limit_packets: int

    def kwargs(self) -> dict:
        kw: dict = {"delay": self.delay_us, "limit": self.limit_packets}
        if self.jitter_us:
            kw["jitter"] = self.jitter_us
        if self.loss_pct:
            kw["loss"] = self.loss_pct
        return kw


def netem_params(delay_ms: float, jitter_ms: float, loss_pct: float, rate_mbit: float) -> NetemParams:
    if delay_ms < 0 or jitter_ms < 0 or not 0 <= loss_pct <= 100:
        raise ValueError("delay/jitter must be >= 0 and loss in [0, 100]")
    # enough packet slots for 2 x the delay at line rate with 1500-byte frames (netem's default 1000 is too few)
    slots = int(rate_mbit * 1e6 / 8 / 1514 * max(rtt_ms(delay_ms) / 1000.0, 0.05)) + 1000
    return NetemParams(int(delay_ms * 1000), int(jitter_ms * 1000), float(loss_pct), slots)


def _tbf_kwargs(p: TbfParams) -> dict:
    return {"rate": p.rate_bytes_s, "burst": p.burst_bytes, "limit": p.limit_bytes}


def add_shaping(ipr, index: int, tbf: TbfParams, netem: NetemParams | None) -> None:
    """Install shaping on one interface (``ipr`` is a pyroute2 IPRoute/NetNS in the right namespace)."""
    if netem is None:
        ipr.tc("add", "tbf", index=index, handle="1:", **_tbf_kwargs(tbf))
    else:
        ipr.tc("add", "netem", index=index, handle="1:", **netem.kwargs())
        ipr.tc("add", "tbf", index=index, handle="2:", parent="1:", **_tbf_kwargs(tbf))


def tbf_handle(under_netem: bool) -> tuple[str, str | None]:
    """(handle, parent) of the tbf that :func:`add_shaping` installs."""
    return ("2:", "1:") if under_netem else ("1:", None)


def keep_burst(tbf: TbfParams, held_bytes: int | None) -> TbfParams:
    """``tbf`` with its burst widened to ``held_bytes`` (the burst the kernel holds) where it would
    shrink a small burst (:func:`change_rate` says why)."""
    if tbf.burst_bytes < MIN_BURST_BYTES and held_bytes is not None and held_bytes > tbf.burst_bytes:
        return TbfParams(tbf.rate_bytes_s, held_bytes, tbf.limit_bytes - tbf.burst_bytes + held_bytes)
    return tbf


def change_rate(ipr, index: int, tbf: TbfParams, *, handle: str = "1:", parent: str | None = None,
                held_burst_bytes: int | None = None) -> tuple[float, TbfParams]:
    """``tc change`` the tbf in place; returns the seconds it took and the tbf applied.

    A burst under :data:`MIN_BURST_BYTES` never shrinks below the one the kernel holds: TCP hands the
    qdisc GSO packets whatever the device's offloads (the device segments them after it), the tbf
    admits each up to its burst, and a packet queued under a larger burst would never fit a smaller
    one: the queue would stall for good (measured: 100 -> 40 Mbit/s with the burst going 50 -> 24 KB).
    ``held_burst_bytes``: that burst, where the caller set it and keeps it (a fabric that owns the tbf);
    else it is read back from the kernel, a dump of every qdisc on the interface (a fair queue puts one
    per class there: 70 ms measured beside 1025, too slow for every trace step)."""
    t0 = time.perf_counter()
    if tbf.burst_bytes < MIN_BURST_BYTES and held_burst_bytes is None:
        held_burst_bytes = read_tbf_burst_bytes(ipr, index)
    tbf = keep_burst(tbf, held_burst_bytes)
    kw = {"parent": parent} if parent else {}
    ipr.tc("change", "tbf", index=index, handle=handle, **kw, **_tbf_kwargs(tbf))
    return time.perf_counter() - t0, tbf


def burst_bytes_of(rate_bytes_s: int, buffer_ticks: int) -> int:
    """A tbf's burst in bytes from what the kernel reports (its rate and its buffer in psched ticks,
    as pyroute2 and tc encode it: ``ticks = burst / rate x 1e6 x tick_in_usec``)."""
    from pyroute2.netlink.rtnl.tcmsg.common import tick_in_usec

    return int(round(buffer_ticks / tick_in_usec / 1e6 * rate_bytes_s))


def _tbf_parms(ipr, index: int):
    """The kernel's TCA_TBF_PARMS of the tbf on ``index`` (None: no tbf there)."""
    for q in ipr.get_qdiscs(index=index):
        if q.get_attr("TCA_KIND") == "tbf":
            return q.get_attr("TCA_OPTIONS").get_attr("TCA_TBF_PARMS")
    return None


def read_tbf_burst_bytes(ipr, index: int) -> int | None:
    """The burst the kernel holds for the tbf on ``index`` (None: no tbf there)."""
    parms = _tbf_parms(ipr, index)
    return None if parms is None else burst_bytes_of(parms["rate"], parms["buffer"])


def read_tbf_rate_mbit(ipr, index: int) -> float | None:
    """The rate the kernel holds for the tbf on ``index`` (read back, not what we asked for)."""
    parms = _tbf_parms(ipr, index)
    return None if parms is None else parms["rate"] * 8 / 1e6
