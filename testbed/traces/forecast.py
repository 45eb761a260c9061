"""What the controller sees: forecasts of renewable-window length and of link bandwidth.

The substrate always sees the truth. Error model (shared with ``testbed.feasibility``):
``forecast = truth * exp(e)``, ``e ~ Normal(ln(1 + bias), noise)``. A window's error is drawn once
per window (a forecast is issued for the window and kept while it lasts), so a bias is not
averaged away by re-forecasting every step.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

from testbed.seeding import derive_seed
from testbed.traces.base import Trace


class WindowForecaster:
    """Remaining renewable window per site: truth, and forecast with per-window error."""

    def __init__(
        self,
        renewable_kw: dict[str, Trace],
        threshold_kw: dict[str, float],
        *,
        bias_frac: float = 0.0,
        noise_frac: float = 0.0,
        seed: int = 0,
    ):
        if noise_frac < 0 or bias_frac <= -1:
            raise ValueError("window forecast: noise must be >= 0 and bias > -100%")
        self._traces = renewable_kw
        self._thr = threshold_kw
        self.bias_frac = bias_frac
        self.noise_frac = noise_frac
        self._starts: dict[str, np.ndarray] = {}
        self._errors: dict[str, np.ndarray] = {}
        mu = math.log1p(bias_frac)
        for site, trace in renewable_kw.items():
            wins = trace.windows_above(threshold_kw[site])
            self._starts[site] = np.array([w[0] for w in wins], dtype=float)
            g = np.random.default_rng(derive_seed(seed, "window-forecast", site))
            self._errors[site] = g.normal(mu, noise_frac, size=len(wins)) if noise_frac > 0 else np.full(len(wins), mu)

    def threshold_kw(self, site: str) -> float:
        return self._thr[site]

    def true_remaining_s(self, site: str, t_s: float) -> float:
        return self._traces[site].remaining_above(t_s, self._thr[site])

    def forecast_remaining_s(self, site: str, t_s: float) -> float:
        true = self.true_remaining_s(site, t_s)
        if true <= 0:
            return 0.0
        k = int(np.searchsorted(self._starts[site], t_s, side="right")) - 1
        return true * math.exp(float(self._errors[site][k]))


BandwidthMode = Literal["nominal", "trace", "trace_with_error"]


class BandwidthForecaster:
    """Bandwidth the controller plans with, per directed site pair."""

    def __init__(
        self,
        truth_gbps: dict[tuple[str, str], Trace],
        nominal_bandwidth_gbps: dict[tuple[str, str], float],
        *,
        mode: BandwidthMode = "nominal",
        bias_frac: float = 0.0,
        noise_frac: float = 0.0,
        seed: int = 0,
        step_s: float = 300.0,
    ):
        self._truth = truth_gbps
        self._nominal = nominal_bandwidth_gbps
        self.mode = mode
        self._mu = math.log1p(bias_frac)
        self._sigma = noise_frac
        self._seed = seed
        self._step_s = step_s

    def pairs(self) -> list[tuple[str, str]]:
        return list(self._nominal)

    def nominal_bandwidth_gbps(self, src: str, dst: str) -> float:
        return self._nominal[(src, dst)]

    def forecast_gbps(self, src: str, dst: str, t_s: float) -> float:
        if self.mode == "nominal":
            return self._nominal[(src, dst)]
        truth = self._truth[(src, dst)].at(t_s)
        if self.mode == "trace":
            return truth
        step = int(t_s // self._step_s)
        g = np.random.default_rng(derive_seed(self._seed, "bw-forecast", src, dst, step))
        return truth * math.exp(float(g.normal(self._mu, self._sigma)) if self._sigma > 0 else self._mu)
