"""Round time of synchronous FedAvg, per site and for the round (units: seconds, bytes, Gbit/s).

Per selected site ``i`` (data share ``n_i`` samples, effective capacity ``C_i`` reference nodes):

    compute_i = E x n_i x data_scale / (samples_per_s x C_i)
    down_i    = latency_i + 8 x update_bytes / bandwidth(agg -> i)      (global model out)
    up_i      = latency_i + 8 x update_bytes / bandwidth(i -> agg)      (update back)
    comm_i    = down_i + up_i

Round time, two models:

- ``straggler`` (default; what synchronous FedAvg does): every site trains its own shard from the
  same global model and the aggregator waits for the last update:
  ``T = max_i (down_i + compute_i + up_i)``.
- ``pooled`` (the paper's Eq. 7, ``T ~ 1 / sum C_k``, on the same work as ``straggler``): the
  samples the selected sites actually train, ``E x sum_i n_i``, shared in proportion to capacity
  over the selected sites (centralised data parallelism), plus the slowest exchange:
  ``T = E x sum_i n_i x data_scale / (samples_per_s x sum_i C_i) + max_i comm_i``.
  Both clocks charge the same samples per round; only how the work is spread differs, so the
  straggler/pooled comparison isolates the clock model.
- ``pooled_eq7_as_written`` (the paper's Eq. 7 as written): every round charges one pass over the
  whole training set, ``E x N_train``, whatever the selected sites hold:
  ``T = E x N_train x data_scale / (samples_per_s x sum_i C_i) + max_i comm_i``.
  At k sites of n_i ~ N_train / K it charges K / k times the work the sites do, so adding a site
  shrinks the round by itself: the inconsistency the review points out.

The accuracy per round always comes from real FedAvg on the selected shards; only the clock differs.

``centralized`` (one site, all the data, no exchange): ``T = E x N_train x data_scale /
(samples_per_s x C_site)`` under both models.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable


@dataclass(frozen=True)
class SiteTime:
    site: str
    n_samples: int
    capacity: float
    compute_s: float
    down_s: float
    up_s: float
    rate: float | None = None  # samples/s of one reference node at this site (None: the model's samples_per_s)

    @property
    def comm_s(self) -> float:
        return self.down_s + self.up_s

    @property
    def total_s(self) -> float:
        return self.down_s + self.compute_s + self.up_s


def compute_s(n_samples: int, capacity: float, *, epochs: int, data_scale: float, samples_per_s: float) -> float:
    if capacity <= 0:
        return float("inf")
    return epochs * n_samples * data_scale / (samples_per_s * capacity)


def transfer_s(update_bytes: float, bandwidth_gbps: float, latency_ms: float) -> float:
    return latency_ms / 1000.0 + 8.0 * update_bytes / (bandwidth_gbps * 1e9)


def straggler_s(times: Iterable[SiteTime]) -> float:
    return max((t.total_s for t in times), default=0.0)


def pooled_s(times: Iterable[SiteTime], *, samples: int, epochs: int, data_scale: float,
             samples_per_s: float) -> float:
    """``samples`` (per epoch) spread over the summed capacity of ``times``' sites, plus the slowest exchange."""
    times = list(times)
    if not times:
        return 0.0
    if any(t.rate is not None for t in times):  # per-site speeds (a compute profile): samples / summed samples/s
        speed = sum(t.capacity * (samples_per_s if t.rate is None else t.rate) for t in times)
        comp = compute_s(samples, speed, epochs=epochs, data_scale=data_scale, samples_per_s=1.0)
        return comp + max(t.comm_s for t in times)
    cap = sum(t.capacity for t in times)
    comp = compute_s(samples, cap, epochs=epochs, data_scale=data_scale, samples_per_s=samples_per_s)
    return comp + max(t.comm_s for t in times)


KINDS = ("straggler", "pooled", "pooled_eq7_as_written")


@dataclass(frozen=True)
class RoundTimeModel:
    kind: str  # straggler | pooled | pooled_eq7_as_written
    epochs: int
    data_scale: float
    samples_per_s: float
    total_samples: int

    def site_compute_s(self, n_samples: int, capacity: float, rate: float | None = None) -> float:
        """``rate``: the site's samples/s per reference node (a compute profile's), else the model's."""
        return compute_s(n_samples, capacity, epochs=self.epochs, data_scale=self.data_scale,
                         samples_per_s=self.samples_per_s if rate is None else rate)

    def samples_charged(self, times: Iterable[SiteTime], kind: str | None = None) -> int:
        """Training samples (all epochs) the clock charges for a round over ``times``' sites."""
        kind = kind or self.kind
        if kind in ("straggler", "pooled"):
            return self.epochs * sum(t.n_samples for t in times)
        if kind == "pooled_eq7_as_written":
            return self.epochs * self.total_samples
        raise ValueError(f"unknown round-time model {kind!r}")

    def round_s(self, times: Iterable[SiteTime], kind: str | None = None) -> float:
        kind = kind or self.kind
        times = list(times)
        if kind == "straggler":
            return straggler_s(times)
        if kind in ("pooled", "pooled_eq7_as_written"):
            return pooled_s(times, samples=self.samples_charged(times, kind) // self.epochs, epochs=self.epochs,
                            data_scale=self.data_scale, samples_per_s=self.samples_per_s)
        raise ValueError(f"unknown round-time model {kind!r}")

    def centralized_s(self, capacity: float, epochs: int | None = None, rate: float | None = None) -> float:
        """One site, the whole training set, ``epochs`` passes (default: the model's ``E``); ``rate``
        as in :meth:`site_compute_s`."""
        return compute_s(self.total_samples, capacity, epochs=self.epochs if epochs is None else epochs,
                         data_scale=self.data_scale, samples_per_s=self.samples_per_s if rate is None else rate)
