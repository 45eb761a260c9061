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
- ``pooled`` (the paper's Eq. 7, ``T ~ 1 / sum C_k``): the round's work is one pass over the whole
  training set, shared in proportion to capacity over the selected sites (centralised data
  parallelism), plus the slowest exchange:
  ``T = E x N_train x data_scale / (samples_per_s x sum_i C_i) + max_i comm_i``.
  Adding a site shrinks the compute term by itself, whatever data it holds: the inconsistency the
  review points out. The accuracy per round still comes from real FedAvg on the selected shards;
  only the clock differs.

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


def pooled_s(times: Iterable[SiteTime], *, total_samples: int, epochs: int, data_scale: float,
             samples_per_s: float) -> float:
    times = list(times)
    if not times:
        return 0.0
    cap = sum(t.capacity for t in times)
    comp = compute_s(total_samples, cap, epochs=epochs, data_scale=data_scale, samples_per_s=samples_per_s)
    return comp + max(t.comm_s for t in times)


@dataclass(frozen=True)
class RoundTimeModel:
    kind: str  # straggler | pooled
    epochs: int
    data_scale: float
    samples_per_s: float
    total_samples: int

    def site_compute_s(self, n_samples: int, capacity: float) -> float:
        return compute_s(n_samples, capacity, epochs=self.epochs, data_scale=self.data_scale,
                         samples_per_s=self.samples_per_s)

    def round_s(self, times: Iterable[SiteTime], kind: str | None = None) -> float:
        kind = kind or self.kind
        if kind == "straggler":
            return straggler_s(times)
        if kind == "pooled":
            return pooled_s(times, total_samples=self.total_samples, epochs=self.epochs, data_scale=self.data_scale,
                            samples_per_s=self.samples_per_s)
        raise ValueError(f"unknown round-time model {kind!r}")

    def centralized_s(self, capacity: float) -> float:
        return self.site_compute_s(self.total_samples, capacity)
