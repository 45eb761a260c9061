"""The sim's transfer model calibrated from emulated transfers, or the reason it is not proposed.

Fit ``actual_transfer = a x 8 S / B + b`` (B: the link's nominal rate) over the emulated
transfers that measured the protocol and nothing else: completed, on an undegraded link
(testbed.analysis.degradation), not flagged ``contended`` (host load during the measurement,
where the recorder flags it) and without another transfer on the same link at the same time.
Protocol efficiency = 1 / a, ramp = b (s). Weighted least squares with weights 1 / x² (the
spread of a transfer's time grows with its length), 95 % confidence intervals from the
standard errors. The block is proposed only when the fit is plausible: at least
``MIN_POINTS`` transfers, efficiency within ``EFFICIENCY_RANGE``, ramp >= 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from testbed.stats import LineFit, line_fit
from testbed.feasibility import TCP_EFFICIENCY_MTU1500, transfer_times_s

MIN_POINTS = 20
EFFICIENCY_RANGE = (0.5, 1.0)


@dataclass
class Calibration:
    emulated: int  # completed emulated transfers
    excluded: dict[str, int]  # reason -> transfers left out (a transfer counts once, first reason)
    n: int  # transfers fitted
    fit: LineFit | None = None
    refused: list[str] = field(default_factory=list)  # why no block is proposed; empty: proposed
    reference_efficiency: float = TCP_EFFICIENCY_MTU1500

    @property
    def proposed(self) -> bool:
        return self.fit is not None and not self.refused

    @property
    def protocol_efficiency(self) -> float | None:
        return 1.0 / self.fit.slope if self.fit and self.fit.slope > 0 else None

    @property
    def efficiency_ci(self) -> tuple[float, float] | None:
        """1 / the slope's interval (NaN-free only while the slope's interval stays above 0)."""
        if not self.fit:
            return None
        lo, hi = self.fit.slope_ci
        return (1.0 / hi if hi > 0 else float("nan"), 1.0 / lo if lo > 0 else float("inf"))

    def as_dict(self) -> dict:
        f = self.fit
        return {"emulated": self.emulated, "excluded": dict(self.excluded), "n": self.n, "proposed": self.proposed,
                "refused": list(self.refused), "reference_efficiency": self.reference_efficiency,
                "protocol_efficiency": self.protocol_efficiency,
                "protocol_efficiency_ci95": self.efficiency_ci,
                "ramp_s": f.intercept if f else None, "ramp_ci95_s": f.intercept_ci if f else None,
                "r2": f.r2 if f else None}


def _flag(d: pd.DataFrame, column: str) -> pd.Series:
    if column not in d.columns:
        return pd.Series(False, index=d.index)
    return d[column].fillna(False).astype(bool)


def _line_rate_s(d: pd.DataFrame) -> np.ndarray:
    """8 S / B per transfer: B the link's nominal rate where known, else the predicted bandwidth
    (the same where the controller plans with nominal rates), else the recorded 8S/B prediction."""
    x = pd.Series(np.nan, index=d.index)
    if "checkpoint_gb" in d.columns:
        for col in ("nominal_bandwidth_gbps", "predicted_bandwidth_gbps"):
            if col in d.columns:
                x = x.fillna(transfer_times_s(d["checkpoint_gb"].astype(float), pd.to_numeric(d[col], errors="coerce")))
    if "predicted_transfer_plain_s" in d.columns:
        x = x.fillna(pd.to_numeric(d["predicted_transfer_plain_s"], errors="coerce"))
    return x.to_numpy(float)


def calibrate(m: pd.DataFrame) -> Calibration | None:
    """The calibration over ``m`` (gathered migrations); None when no emulated transfer completed."""
    if not len(m) or "substrate" not in m.columns:
        return None
    d = m[(m["substrate"] != "sim") & (m["status"] == "completed")]
    if not len(d):
        return None
    excluded: dict[str, int] = {}
    keep = pd.Series(True, index=d.index)
    same_link = d["same_link_overlaps"] > 0 if "same_link_overlaps" in d.columns else pd.Series(False, index=d.index)
    for reason, bad in (("degraded link", _flag(d, "degraded")), ("contended host", _flag(d, "contended")),
                        ("another transfer on the same link", same_link)):
        hit = keep & bad
        excluded[reason] = int(hit.sum())
        keep &= ~bad
    d = d[keep]
    cal = Calibration(emulated=int(len(keep)), excluded=excluded, n=int(len(d)))
    if not len(d):
        cal.refused.append(f"every one of the {cal.emulated} emulated transfers is excluded "
                           + ", ".join(f"{k}: {v}" for k, v in excluded.items() if v))
        return cal
    x = _line_rate_s(d)
    y = pd.to_numeric(d["actual_transfer_s"], errors="coerce").to_numpy(float)  # measured only: emulated rows
    ok = np.isfinite(x) & np.isfinite(y) & (x > 0)
    x, y = x[ok], y[ok]
    cal.n = int(x.size)
    if cal.n < MIN_POINTS:
        cal.refused.append(f"only {cal.n} usable transfers (at least {MIN_POINTS} needed)")
    try:
        cal.fit = line_fit(x, y, weights=1.0 / x**2)
    except ValueError:
        cal.refused.append("fewer than 3 transfers, or all of one 8S/B: no line can be fitted")
        return cal
    eff = cal.protocol_efficiency
    lo, hi = EFFICIENCY_RANGE
    if eff is None or not lo <= eff <= hi:
        shown = "undefined (slope <= 0)" if eff is None else f"{eff:.3f}"
        cal.refused.append(f"protocol efficiency {shown} is outside [{lo:g}, {hi:g}]")
    if cal.fit.intercept < 0:
        cal.refused.append(f"negative ramp ({cal.fit.intercept:.2f} s): a transfer cannot take less than its bytes")
    return cal


def calibrate_transfer(m: pd.DataFrame) -> dict | None:
    """:func:`calibrate` as a plain dict (None when no emulated transfer completed)."""
    cal = calibrate(m)
    return None if cal is None else cal.as_dict()


def markdown(cal: Calibration) -> list[str]:
    """The report's section: the fit with its intervals, and the block or why there is none."""
    excl = ", ".join(f"{k}: {v}" for k, v in cal.excluded.items() if v) or "none"
    lines = ["## Sim transfer model calibrated from emulation", "",
             f"Of {cal.emulated} completed emulated transfers, excluded: {excl}; fitted: {cal.n}. "
             "Fit: actual transfer = a x 8S/B + b (B the link's nominal rate), weighted least squares "
             "(weights 1/x²), 95 % confidence intervals from the standard errors.", ""]
    f = cal.fit
    if f is not None:
        elo, ehi = cal.efficiency_ci
        eff = cal.protocol_efficiency
        lines += [f"- protocol efficiency 1/a: {'-' if eff is None else f'{eff:.4f}'} "
                  f"(95 % CI [{elo:.4f}, {ehi:.4f}]; TCP over MTU 1500: {cal.reference_efficiency:.4f})",
                  f"- ramp b: {f.intercept:.2f} s (95 % CI [{f.intercept_ci[0]:.2f}, {f.intercept_ci[1]:.2f}] s)",
                  f"- weighted R²: {f.r2:.3f}", ""]
    if cal.proposed:
        lines += ["To use it in sim runs:", "", "```yaml", "substrate:",
                  f"  protocol_efficiency: {min(1.0, cal.protocol_efficiency):.4f}",
                  "  slow_start: true   # keeps the RTT ramp", "```", ""]
    else:
        lines += ["**No substrate block is proposed:** " + "; ".join(cal.refused) + ".", ""]
    return lines
