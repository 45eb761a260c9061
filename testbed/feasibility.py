"""Migration feasibility model of arXiv 2511.16182 (Eq. 1 and Eq. 2), done as the review asks.

Pure functions, no I/O. Units are in every name: sizes in GB (1e9 bytes), bandwidths in
Gbit/s (1e9 bit/s), times in seconds unless the name says otherwise.

- Eq. 1 (time feasibility): ``T_transfer + T_load + T_downtime < alpha * T_energy``, with
  ``T_transfer = 8 * S / B``.  Strict inequality: a migration exactly on the boundary is infeasible.
- Eq. 2 (energy breakeven): ``E_cost = P_sys * T_transfer``; ``T_breakeven = E_cost / P_node``.
- Classes.  :func:`paper_class` is the paper's fixed labels (60 s / 300 s transfer-time cut-offs,
  independent of the window).  :func:`feasibility_class` is ours: it follows Eq. 1 jointly with
  the window and the bandwidth (the review's first objection), with a robustness margin against
  bandwidth degradation.
- Risk budget (the paper's stochastic window, never evaluated there).  Forecast error model,
  shared with the trace layer: ``W_forecast = W_true * exp(e)``, ``e ~ Normal(mu, sigma)``,
  ``mu = ln(1 + bias_frac)``, ``sigma = noise_frac``.
- One prediction: :func:`assess` returns a frozen :class:`Prediction`, the deterministic verdict
  (``nominal_*``) and the risk budget's (``risk_*``) side by side. Policies rank candidates on it,
  and the controller records it beside what happened.

Every correction to the paper's transfer model is OFF by default, so that the paper's arithmetic
is reproduced exactly unless a caller asks for more realism.
"""

from __future__ import annotations

import math
import dataclasses
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the scenario's model (a lower layer), for annotations only
    from testbed.spec.policies import FeasibilityModel

# TCP goodput / configured rate with a 1500-byte MTU: 1448 payload bytes (20 IP + 20 TCP + 12
# timestamp option bytes of header) per 1514-byte Ethernet frame.  Measured on this testbed's
# shaped links: 95.6-95.9 % (`testbed bench shaping`), i.e. this ideal.
TCP_EFFICIENCY_MTU1500 = 1448 / 1514

# The paper's fixed transfer-time cut-offs for its classes A/B/C.
PAPER_CLASS_A_MAX_S = 60.0
PAPER_CLASS_B_MAX_S = 300.0

_STD_NORMAL = NormalDist()


class FeasibilityInputError(ValueError):
    """An input (or a quantity derived from the inputs) is out of range; ``name`` says which."""

    def __init__(self, name: str, message: str):
        self.name, self.message = name, message
        super().__init__(f"{name}: {message}")


def _require(ok: bool, name: str, message: str) -> None:
    if not ok:
        raise FeasibilityInputError(name, message)


# Below this the (1 - epsilon) quantile is not representable in double precision (1 - 1e-17 == 1).
MIN_EPSILON = 1e-12
_OVERFLOW = "overflows (the inputs are out of range: the result is not a finite number)"


def _finite(x: float) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


@dataclass(frozen=True)
class Corrections:
    """Optional corrections to the paper's ``8 * S / B`` transfer model (all off by default)."""

    protocol_efficiency: float | None = None  # goodput / configured rate; None = off
    rtt_ms: float | None = None  # when set: 1 RTT handshake + slow-start ramp; None = off
    init_cwnd_segments: int = 10
    mss_bytes: int = 1448

    def __post_init__(self) -> None:
        eff = self.protocol_efficiency
        _require(eff is None or (_finite(eff) and 0 < eff <= 1), "protocol_efficiency", "must be in (0, 1]")
        _require(self.rtt_ms is None or (_finite(self.rtt_ms) and self.rtt_ms >= 0), "rtt_ms", "must be >= 0")
        _require(self.init_cwnd_segments >= 1, "init_cwnd_segments", "must be >= 1")
        _require(self.mss_bytes >= 1, "mss_bytes", "must be >= 1")

    def names(self) -> list[str]:
        """The corrections that are on, for logs and manifests (empty: the paper's model)."""
        on = []
        if self.protocol_efficiency is not None:
            on.append("protocol_efficiency")
        if self.rtt_ms is not None:
            on.append("slow_start")
        return on


@dataclass(frozen=True)
class FeasibilityParams:
    """Parameters of Eq. 1 / Eq. 2; defaults are the paper's values."""

    alpha: float = 0.1
    t_load_s: float = 10.3  # the fixed part of T_load
    t_downtime_s: float = 0.4
    p_sys_kw: float = 1.8  # system power during the transfer
    p_node_kw: float = 0.75  # compute power at the destination
    robust_degradation_frac: float = 0.5  # class A survives this fractional bandwidth loss
    corrections: Corrections = field(default_factory=Corrections)
    t_load_s_per_gb: float = 0.0  # T_load = t_load_s + S x t_load_s_per_gb (0: the paper's constant)

    def load_s(self, size_gb: float) -> float:
        """T_load of a checkpoint of ``size_gb``."""
        return self.t_load_s + size_gb * self.t_load_s_per_gb

    def __post_init__(self) -> None:
        _require(_finite(self.alpha) and 0 < self.alpha <= 1, "alpha", "must be in (0, 1]")
        _require(_finite(self.t_load_s) and self.t_load_s >= 0, "t_load_s", "must be >= 0")
        _require(_finite(self.t_load_s_per_gb) and self.t_load_s_per_gb >= 0, "t_load_s_per_gb", "must be >= 0")
        _require(_finite(self.t_downtime_s) and self.t_downtime_s >= 0, "t_downtime_s", "must be >= 0")
        _require(_finite(self.p_sys_kw) and self.p_sys_kw > 0, "p_sys_kw", "must be > 0")
        _require(_finite(self.p_node_kw) and self.p_node_kw > 0, "p_node_kw", "must be > 0")
        frac = self.robust_degradation_frac
        _require(_finite(frac) and 0 <= frac < 1, "robust_degradation_frac", "must be in [0, 1)")
        _require(isinstance(self.corrections, Corrections), "corrections", "must be a Corrections")

    @classmethod
    def from_model(cls, model: FeasibilityModel, *, rtt_ms: float, p_sys_kw: float, p_node_kw: float) -> FeasibilityParams:
        """The parameters of a scenario's model (its ``alpha``, ``t_load_s``, ``t_downtime_s``,
        ``robust_degradation_frac`` and the names of the corrections that are on) for one move:
        the link's ``rtt_ms`` (used by the slow-start correction) and the powers at its ends."""
        return cls(
            alpha=model.alpha, t_load_s=model.t_load_s, t_load_s_per_gb=model.t_load_s_per_gb,
            t_downtime_s=model.t_downtime_s, p_sys_kw=p_sys_kw,
            p_node_kw=p_node_kw, robust_degradation_frac=model.robust_degradation_frac,
            corrections=Corrections(
                protocol_efficiency=TCP_EFFICIENCY_MTU1500 if "protocol_efficiency" in model.corrections else None,
                rtt_ms=rtt_ms if "slow_start" in model.corrections else None,
            ),
        )


# ---------------------------------------------------------------------------- transfer time


def slow_start_penalty_s(
    size_bytes: float, bandwidth_gbps: float, rtt_ms: float, init_cwnd_segments: int = 10, mss_bytes: int = 1448
) -> float:
    """Extra time of one TCP transfer over sending ``size_bytes`` at line rate from t = 0.

    Round-based slow-start model (no loss, receiver window not limiting).  Let
    ``R = rtt``, ``C = bandwidth_gbps * 1e9 / 8`` bytes/s, ``w_k = init_cwnd * 2**k`` segments.

    - Handshake: 1 RTT before the first data byte.
    - Round ``k`` (k = 0, 1, ...) sends ``w_k * mss`` bytes and lasts one RTT, for as long as
      ``w_k * mss < C * R`` (the window is below the bandwidth-delay product) and data is left.
      Say this stops after ``n`` rounds having sent ``D = min(S, init_cwnd * mss * (2**n - 1))``.
    - The remaining ``S - D`` bytes then go at line rate.

    Hence ``T = R + n * R + (S - D) / C`` and the penalty is
    ``T - S / C = R + n * R - D / C``.  Each slow-start round sends less than ``C * R`` bytes, so
    ``R <= penalty <= R * (1 + n)`` with ``n <= ceil(log2(C * R / (init_cwnd * mss))) + 1``.
    A round that ends the transfer is charged a full RTT.
    """
    _require(_finite(size_bytes) and size_bytes >= 0, "size_bytes", "must be >= 0")
    _require(_finite(bandwidth_gbps) and bandwidth_gbps > 0, "bandwidth_gbps", "must be > 0")
    _require(_finite(rtt_ms) and rtt_ms >= 0, "rtt_ms", "must be >= 0")
    _require(init_cwnd_segments >= 1, "init_cwnd_segments", "must be >= 1")
    _require(mss_bytes >= 1, "mss_bytes", "must be >= 1")
    rtt_s = rtt_ms / 1000.0
    rate_bytes_per_s = bandwidth_gbps * 1e9 / 8.0
    bdp_bytes = rate_bytes_per_s * rtt_s
    window_bytes = float(init_cwnd_segments * mss_bytes)
    sent_bytes = 0.0
    rounds = 0
    while sent_bytes < size_bytes and window_bytes < bdp_bytes:
        sent_bytes = min(float(size_bytes), sent_bytes + window_bytes)
        window_bytes *= 2.0
        rounds += 1
    return rtt_s * (1 + rounds) - sent_bytes / rate_bytes_per_s


def transfer_time_s(size_gb: float, bandwidth_gbps: float, corrections: Corrections = Corrections()) -> float:
    """Checkpoint transfer time: ``8 * S / B``, divided by the protocol efficiency when that
    correction is on, plus :func:`slow_start_penalty_s` (at the goodput rate) when ``rtt_ms`` is set."""
    _require(_finite(size_gb) and size_gb >= 0, "size_gb", "must be >= 0")
    _require(_finite(bandwidth_gbps) and bandwidth_gbps > 0, "bandwidth_gbps", "must be > 0")
    goodput_gbps = bandwidth_gbps * (corrections.protocol_efficiency or 1.0)
    time_s = 8.0 * size_gb / goodput_gbps
    if corrections.rtt_ms is not None:
        time_s += slow_start_penalty_s(
            size_gb * 1e9, goodput_gbps, corrections.rtt_ms, corrections.init_cwnd_segments, corrections.mss_bytes
        )
    _require(math.isfinite(time_s), "transfer_s", _OVERFLOW)
    return time_s


def transfer_times_s(size_gb, bandwidth_gbps, protocol_efficiency: float | None = None):
    """:func:`transfer_time_s` over arrays or pandas Series at once (what analysis applies to every
    recorded migration): ``8 * S / B``, then divided by ``protocol_efficiency`` when given; no
    slow-start term and no checks (a zero or missing rate gives inf or NaN for that element)."""
    time_s = 8.0 * size_gb / bandwidth_gbps
    return time_s if protocol_efficiency is None else time_s / protocol_efficiency


def size_for_transfer_time_gb(time_s: float, bandwidth_gbps: float, corrections: Corrections = Corrections()) -> float:
    """Supremum of the sizes whose :func:`transfer_time_s` is below ``time_s`` (0 if none).

    Closed form ``time * B * eff / 8`` without the slow-start correction; bisection with it
    (transfer time is non-decreasing in size, and slow start only adds time, so the closed form
    brackets the answer)."""
    _require(_finite(time_s), "time_s", "must be finite")
    _require(_finite(bandwidth_gbps) and bandwidth_gbps > 0, "bandwidth_gbps", "must be > 0")
    upper_gb = max(0.0, time_s) * bandwidth_gbps * (corrections.protocol_efficiency or 1.0) / 8.0
    if corrections.rtt_ms is None:
        return upper_gb
    if transfer_time_s(0.0, bandwidth_gbps, corrections) >= time_s:
        return 0.0
    lo_gb, hi_gb = 0.0, upper_gb  # transfer_time(lo) < time_s <= transfer_time(hi)
    for _ in range(200):
        if hi_gb - lo_gb <= 1e-13 * hi_gb:
            break
        mid_gb = 0.5 * (lo_gb + hi_gb)
        if transfer_time_s(mid_gb, bandwidth_gbps, corrections) < time_s:
            lo_gb = mid_gb
        else:
            hi_gb = mid_gb
    return hi_gb


# ---------------------------------------------------------------------------- Eq. 1 and Eq. 2


def budget_s(window_s: float, alpha: float) -> float:
    """Right-hand side of Eq. 1: ``alpha * T_energy``."""
    _require(_finite(window_s) and window_s >= 0, "window_s", "must be >= 0")
    _require(_finite(alpha) and 0 < alpha <= 1, "alpha", "must be in (0, 1]")
    return alpha * window_s


def migration_total_s(size_gb: float, bandwidth_gbps: float, params: FeasibilityParams) -> float:
    """Left-hand side of Eq. 1: ``T_transfer + T_load + T_downtime``."""
    return transfer_time_s(size_gb, bandwidth_gbps, params.corrections) + params.load_s(size_gb) + params.t_downtime_s


def energy_cost_kwh(p_sys_kw: float, transfer_s: float) -> float:
    """Eq. 2: ``E_cost = P_sys * T_transfer``."""
    _require(_finite(p_sys_kw) and p_sys_kw > 0, "p_sys_kw", "must be > 0")
    _require(_finite(transfer_s) and transfer_s >= 0, "transfer_s", "must be >= 0")
    e_cost = p_sys_kw * transfer_s / 3600.0
    _require(math.isfinite(e_cost), "e_cost_kwh", _OVERFLOW)
    return e_cost


def breakeven_min(e_cost_kwh: float, p_node_kw: float) -> float:
    """Eq. 2: ``T_breakeven = E_cost / P_node``, in minutes."""
    _require(_finite(e_cost_kwh) and e_cost_kwh >= 0, "e_cost_kwh", "must be >= 0")
    _require(_finite(p_node_kw) and p_node_kw > 0, "p_node_kw", "must be > 0")
    minutes = e_cost_kwh / p_node_kw * 60.0
    _require(math.isfinite(minutes), "breakeven_min", _OVERFLOW)
    return minutes


def paper_class(transfer_s: float) -> str:
    """The PAPER's fixed labels: "A" below 60 s, "B" for 60-300 s, "C" from 300 s (window-blind)."""
    _require(_finite(transfer_s) and transfer_s >= 0, "transfer_s", "must be >= 0")
    if transfer_s < PAPER_CLASS_A_MAX_S:
        return "A"
    if transfer_s < PAPER_CLASS_B_MAX_S:
        return "B"
    return "C"


def feasibility_class(size_gb: float, bandwidth_gbps: float, window_s: float, params: FeasibilityParams) -> str:
    """OUR classes, from Eq. 1 jointly with the window and the bandwidth.

    "C": infeasible (total >= budget).  "A": still feasible if the bandwidth drops by
    ``params.robust_degradation_frac``.  "B": feasible at the nominal bandwidth only."""
    limit_s = budget_s(window_s, params.alpha)
    if migration_total_s(size_gb, bandwidth_gbps, params) >= limit_s:
        return "C"
    degraded_gbps = bandwidth_gbps * (1.0 - params.robust_degradation_frac)
    if migration_total_s(size_gb, degraded_gbps, params) < limit_s:
        return "A"
    return "B"


def max_size_gb(bandwidth_gbps: float, window_s: float, params: FeasibilityParams) -> float:
    """The Eq. 1 boundary: every smaller checkpoint is feasible, this size and larger are not.

    ``(alpha * W - T_load - T_downtime) * B / 8`` without corrections (closed form); bisection
    with the slow-start correction or a load time that grows with size.  0 if load + downtime already use the whole budget."""
    limit_s = budget_s(window_s, params.alpha)
    available_s = limit_s - params.t_load_s - params.t_downtime_s
    if available_s <= 0:
        return 0.0
    size_gb = size_for_transfer_time_gb(available_s, bandwidth_gbps, params.corrections)

    def feasible(s_gb: float) -> bool:
        return migration_total_s(s_gb, bandwidth_gbps, params) < limit_s

    if params.t_load_s_per_gb > 0:  # load grows with size too: bisect below the transfer-only bound
        lo, hi = 0.0, size_gb
        for _ in range(200):
            mid = (lo + hi) / 2.0
            if mid in (lo, hi):
                break
            lo, hi = (mid, hi) if feasible(mid) else (lo, mid)
        size_gb = hi

    # Snap to the float where Eq. 1 flips, undoing the rounding of the closed form (a few ulps).
    for _ in range(64):
        if feasible(size_gb):
            size_gb = math.nextafter(size_gb, math.inf)
        elif size_gb > 0 and not feasible(below := math.nextafter(size_gb, 0.0)):
            size_gb = below
        else:
            break
    return size_gb


# ---------------------------------------------------------------------------- risk budget


def _forecast_error(noise_frac: float, bias_frac: float) -> tuple[float, float]:
    _require(_finite(noise_frac) and noise_frac >= 0, "noise_frac", "must be >= 0")
    _require(_finite(bias_frac) and bias_frac > -1, "bias_frac", "must be > -1")
    return math.log1p(bias_frac), noise_frac


def prob_window_at_least(needed_s: float, window_forecast_s: float, noise_frac: float, bias_frac: float = 0.0) -> float:
    """``P(W_true >= needed_s)`` given the forecast, under the module's forecast error model:
    ``Phi((ln(W_forecast / needed_s) - mu) / sigma)``.  With ``sigma == 0`` the true window is
    ``W_forecast / (1 + bias)`` exactly, and the answer is 1.0 or 0.0."""
    _require(_finite(window_forecast_s) and window_forecast_s >= 0, "window_forecast_s", "must be >= 0")
    _require(_finite(needed_s), "needed_s", "must be finite")
    mu, sigma = _forecast_error(noise_frac, bias_frac)
    if needed_s <= 0:
        return 1.0
    if window_forecast_s == 0:  # no window forecast: none, whatever the error model
        return 0.0
    if sigma == 0:
        return 1.0 if window_forecast_s / (1.0 + bias_frac) >= needed_s else 0.0
    return _STD_NORMAL.cdf((math.log(window_forecast_s / needed_s) - mu) / sigma)


def risk_adjusted_window_s(window_forecast_s: float, noise_frac: float, epsilon: float, bias_frac: float = 0.0) -> float:
    """The largest window ``w`` with ``P(W_true >= w) >= 1 - epsilon``:
    ``W_forecast * exp(-(mu + sigma * z_{1-epsilon}))``.

    ``epsilon`` must be in (0, 0.5]: above 0.5 the quantile lies above the median, and more
    forecast noise would *lengthen* the window a migration may rely on."""
    _require(_finite(window_forecast_s) and window_forecast_s >= 0, "window_forecast_s", "must be >= 0")
    _require(_finite(epsilon) and MIN_EPSILON <= epsilon <= 0.5, "epsilon", f"must be in [{MIN_EPSILON:g}, 0.5]")
    mu, sigma = _forecast_error(noise_frac, bias_frac)
    z = _STD_NORMAL.inv_cdf(1.0 - epsilon)
    exponent = -(mu + sigma * z)
    _require(math.isfinite(exponent) and exponent < 700.0, "risk_window_s", _OVERFLOW)
    window_s = window_forecast_s * math.exp(exponent)
    _require(math.isfinite(window_s), "risk_window_s", _OVERFLOW)
    return window_s


# ---------------------------------------------------------------------------- one prediction


@dataclass(frozen=True)
class Prediction:
    """Everything the model says about one migration from one set of forecasts: the inputs, the
    Eq. 1 terms, Eq. 2, and the verdicts of both rules side by side.

    ``nominal_*``: deterministic Eq. 1 on the forecasts, ``total_s < alpha * window_s``.
    ``risk_*`` (None without ``epsilon``): Eq. 1 against the risk-adjusted window (and, with
    bandwidth noise, the risk-adjusted total). ``feasible``, ``budget_s``, ``margin_s`` and
    ``feasibility_class`` are always the verdict of the rule the prediction was made under:
    the risk budget's when ``epsilon`` is set, else the nominal one."""

    size_gb: float
    bandwidth_gbps: float  # the forecast
    window_s: float  # the forecast window
    alpha: float
    epsilon: float | None  # the risk budget; None: the nominal rule decides
    corrections: list[str]  # the corrections to 8 S / B that are on
    # Eq. 1's left-hand side at the forecasts (the point prediction)
    transfer_s: float
    load_s: float
    downtime_s: float
    total_s: float
    paper_class: str
    # Eq. 2
    e_cost_kwh: float
    breakeven_min: float
    # deterministic Eq. 1 on the forecast window
    nominal_budget_s: float  # alpha * window_s
    nominal_margin_s: float  # nominal_budget_s - total_s; > 0 iff nominal_feasible
    nominal_feasible: bool
    nominal_class: str
    # the risk budget (all None without epsilon)
    risk_window_s: float | None = None  # the (1 - epsilon)-quantile of the true window (epsilon/2 with bandwidth noise)
    risk_total_s: float | None = None  # total at the bandwidth's epsilon/2 quantile; total_s without bandwidth noise
    risk_budget_s: float | None = None  # alpha * risk_window_s
    risk_margin_s: float | None = None  # risk_budget_s - risk_total_s; > 0 iff risk_feasible
    risk_feasible: bool | None = None
    risk_class: str | None = None  # the classes against risk_budget_s
    p_window_ok: float | None = None  # P(W_true >= risk_total_s / alpha) under the forecast error model

    @property
    def feasible(self) -> bool:
        """The verdict of the prediction's rule (the risk budget's with ``epsilon``)."""
        return self.nominal_feasible if self.risk_feasible is None else self.risk_feasible

    @property
    def budget_s(self) -> float:
        """The budget of the prediction's rule (``alpha`` x the risk-adjusted window with ``epsilon``)."""
        return self.nominal_budget_s if self.risk_budget_s is None else self.risk_budget_s

    @property
    def margin_s(self) -> float:
        """``budget_s`` minus the total the rule compares with it; > 0 iff ``feasible``."""
        return self.nominal_margin_s if self.risk_margin_s is None else self.risk_margin_s

    @property
    def feasibility_class(self) -> str:
        """Our class (A/B/C) under the prediction's rule."""
        return self.nominal_class if self.risk_class is None else self.risk_class

    def to_dict(self) -> dict:
        """JSON-ready dict: the fields in order, then the rule's verdict (``budget_s``, ``margin_s``,
        ``feasible``, ``feasibility_class``)."""
        d = dataclasses.asdict(self)
        d.update(budget_s=self.budget_s, margin_s=self.margin_s, feasible=self.feasible,
                 feasibility_class=self.feasibility_class)
        return d


def assess(
    size_gb: float,
    bandwidth_gbps: float,
    window_s: float,
    params: FeasibilityParams = FeasibilityParams(),
    *,
    epsilon: float | None = None,
    window_noise_frac: float = 0.0,
    window_bias_frac: float = 0.0,
    bandwidth_noise_frac: float = 0.0,
) -> Prediction:
    """Predict one migration: deterministic Eq. 1 (``total < alpha * window``) always; with
    ``epsilon`` also Eq. 1 against the risk-adjusted window, ``total < alpha * risk_adjusted_window_s(...)``,
    which is ``P(W_true >= total / alpha) >= 1 - epsilon`` up to the (measure-zero) boundary and
    reduces to the deterministic rule exactly when noise and bias are 0. Classes use the same budgets.

    ``bandwidth_noise_frac`` (with ``epsilon``): the bandwidth is uncertain too, log-normal with
    that sigma around the forecast. The budget is then split by the union bound: the window at its
    ``(1 - epsilon/2)`` quantile and the transfer at the bandwidth's ``epsilon/2`` quantile
    (``B * exp(-sigma_b * z_{1-epsilon/2})``), so both hold together with probability
    >= 1 - epsilon. ``transfer_s`` / ``total_s`` stay the point predictions (what Eq. 1 says);
    ``risk_total_s`` is the total the risk verdict uses."""
    _require(_finite(window_s) and window_s >= 0, "window_s", "must be >= 0")  # 0: no window open
    _require(_finite(bandwidth_noise_frac) and bandwidth_noise_frac >= 0, "bandwidth_noise_frac", "must be >= 0")
    if epsilon is None and (window_noise_frac != 0 or window_bias_frac != 0 or bandwidth_noise_frac != 0):
        raise ValueError("epsilon: required when window_noise_frac, window_bias_frac or bandwidth_noise_frac is set")
    transfer = transfer_time_s(size_gb, bandwidth_gbps, params.corrections)
    total = transfer + params.load_s(size_gb) + params.t_downtime_s
    nominal_budget = budget_s(window_s, params.alpha)
    e_cost = energy_cost_kwh(params.p_sys_kw, transfer)
    risk: dict = {}
    if epsilon is not None:
        eps_window = epsilon / 2.0 if bandwidth_noise_frac > 0 else epsilon
        risk_window = risk_adjusted_window_s(window_s, window_noise_frac, eps_window, window_bias_frac)
        risk_budget = budget_s(risk_window, params.alpha)
        risk_total = total
        if bandwidth_noise_frac > 0:
            z = _STD_NORMAL.inv_cdf(1.0 - epsilon / 2.0)
            risk_bw = bandwidth_gbps * math.exp(-bandwidth_noise_frac * z)
            risk_total = transfer_time_s(size_gb, risk_bw, params.corrections) + params.load_s(size_gb) + params.t_downtime_s
        risk = dict(
            risk_window_s=risk_window, risk_total_s=risk_total, risk_budget_s=risk_budget,
            risk_margin_s=risk_budget - risk_total, risk_feasible=risk_total < risk_budget,
            risk_class=feasibility_class(size_gb, bandwidth_gbps, risk_window, params),
            p_window_ok=prob_window_at_least(risk_total / params.alpha, window_s, window_noise_frac, window_bias_frac),
        )
    return Prediction(
        size_gb=float(size_gb),
        bandwidth_gbps=float(bandwidth_gbps),
        window_s=float(window_s),
        alpha=params.alpha,
        epsilon=epsilon,
        corrections=params.corrections.names(),
        transfer_s=transfer,
        load_s=params.load_s(size_gb),
        downtime_s=params.t_downtime_s,
        total_s=total,
        paper_class=paper_class(transfer),
        e_cost_kwh=e_cost,
        breakeven_min=breakeven_min(e_cost, params.p_node_kw),
        nominal_budget_s=nominal_budget,
        nominal_margin_s=nominal_budget - total,
        nominal_feasible=total < nominal_budget,
        nominal_class=feasibility_class(size_gb, bandwidth_gbps, window_s, params),
        **risk,
    )
