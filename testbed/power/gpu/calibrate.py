"""``testbed calibrate power``: measure a power profile on a real GPU through NVML.

For each cap: set it (:class:`~testbed.power.gpu.nvml.NvmlNode` restores the previous limits on every
exit path), train briefly, and record the requested cap, the enforced cap read back, the mean
power drawn over the timed window (from the energy counter) and the steps/s. The profile written
from those rows normalises throughput to the highest cap measured; its range is the range
measured (outside it the model clamps), and the raw rows go into its ``measured:`` block.

The stand-in workloads (:mod:`testbed.nodes.workloads`) are small: on a large GPU they may not
draw enough power for a cap to bind, which the rows show (drawn power well under the cap,
throughput flat). Pick the largest (``--family char-transformer``) for a stronger load.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone

from testbed.errors import TestbedError
from testbed.power.gpu.device import PowerLimits, PowerNode
from testbed.power.gpu.profile import PowerProfile, ProfilePoint


class CalibrationError(TestbedError):
    """A calibration could not produce a usable profile (the message says which cap and why)."""


@dataclass(frozen=True)
class CalibrationRow:
    requested_w: float
    enforced_w: float
    mean_power_w: float
    energy_j: float
    seconds: float
    steps: int
    steps_per_s: float


@dataclass(frozen=True)
class Calibration:
    device: str
    torch_device: str
    family: str
    limits: PowerLimits
    idle_w: float
    seconds_per_cap: float
    rows: tuple[CalibrationRow, ...]

    def measured(self) -> dict:
        """The ``measured:`` block of the profile file: everything recorded, unchanged."""
        return {
            "device": self.device, "torch_device": self.torch_device, "family": self.family,
            "device_limits_w": asdict(self.limits), "idle_w": self.idle_w,
            "seconds_per_cap": self.seconds_per_cap, "rows": [asdict(r) for r in self.rows],
            "at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }


def default_caps(limits: PowerLimits, n: int) -> list[float]:
    """``n`` >= 2 caps evenly spaced over the device's range, whole watts, both ends included."""
    if n < 2:
        raise CalibrationError(f"need at least 2 caps to calibrate, got {n}")
    step = (limits.max_w - limits.min_w) / (n - 1)
    return [limits.min_w] + [float(round(limits.min_w + i * step)) for i in range(1, n - 1)] + [limits.max_w]


def _sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _train_for(job, seconds: float) -> tuple[int, float]:
    steps, t0 = 0, time.perf_counter()
    while True:
        job.step()
        steps += 1
        if steps % 10 == 0:
            _sync(job.device)
            elapsed = time.perf_counter() - t0
            if elapsed >= seconds:
                return steps, elapsed


def measure_idle_w(node: PowerNode, seconds: float) -> float:
    with node.measure("idle") as w:
        time.sleep(seconds)
    return w.measurement.mean_power_w  # type: ignore[union-attr]


def calibrate(node: PowerNode, caps_w: list[float], *, family: str = "char-transformer",
              seconds: float = 10.0, warmup_s: float = 2.0, idle_s: float = 2.0, seed: int = 0,
              device: str | None = None, log=print) -> Calibration:
    """Run the calibration on ``node`` (already entered, so its limits are restored afterwards)."""
    from testbed.nodes.job import TrainingJob

    if seconds <= 0 or warmup_s < 0 or idle_s < 0:
        raise CalibrationError("seconds must be > 0, warm-up and idle times >= 0")
    limits = node.limits_w()
    for cap in caps_w:
        limits.check(node.name, cap)  # refuse the whole run before any cap is set
    idle_w = measure_idle_w(node, idle_s) if idle_s > 0 else 0.0
    job = TrainingJob.create(family, seed, device=device)
    rows = []
    for cap in sorted(caps_w):
        node.set_limit_w(cap)
        enforced = node.enforced_limit_w()
        if warmup_s > 0:
            _train_for(job, warmup_s)
        _sync(job.device)
        with node.measure(f"cap-{cap:g}") as w:
            steps, elapsed = _train_for(job, seconds)
        m = w.measurement
        row = CalibrationRow(cap, enforced, m.mean_power_w, m.energy_j, elapsed, steps, steps / elapsed)  # type: ignore[union-attr]
        rows.append(row)
        log(f"  cap {cap:g} W: enforced {enforced:g} W, drew {row.mean_power_w:.1f} W, "
            f"{row.steps_per_s:.1f} steps/s")
    return Calibration(node.name, str(job.device), family, limits, idle_w, seconds, tuple(rows))


def to_profile(cal: Calibration, name: str) -> tuple[PowerProfile, list[str]]:
    """The profile of a calibration, and what had to be adjusted to make it one (noise)."""
    rows = sorted(cal.rows, key=lambda r: r.requested_w)
    if len(rows) < 2:
        raise CalibrationError("need at least 2 measured caps for a profile")
    top = rows[-1].steps_per_s
    if top <= 0 or any(r.steps <= 0 for r in rows):
        raise CalibrationError("a cap trained no steps; nothing to normalise to")
    notes, points, frac_floor, draw_floor = [], [], 0.0, 0.0
    for r in rows:
        frac, draw = min(1.0, r.steps_per_s / top), min(r.mean_power_w, r.requested_w)
        if r.steps_per_s > top:
            notes.append(f"{r.requested_w:g} W: faster than the highest cap ({r.steps_per_s:.2f} > "
                         f"{top:.2f} steps/s); throughput_frac clipped to 1")
        if r.mean_power_w > r.requested_w:
            notes.append(f"{r.requested_w:g} W: drew {r.mean_power_w:.1f} W over the cap; draw_w clipped")
        if frac < frac_floor or draw < draw_floor:
            notes.append(f"{r.requested_w:g} W: below a lower cap's throughput or draw; raised to it")
        frac_floor, draw_floor = max(frac, frac_floor), max(draw, draw_floor)
        points.append(ProfilePoint(r.requested_w, frac_floor, draw_floor))
    lo, hi = rows[0].requested_w, rows[-1].requested_w
    source = (f"testbed calibrate power on {cal.device} ({cal.torch_device}): {cal.family}, "
              f"{cal.seconds_per_cap:g} s per cap; throughput relative to {hi:g} W. The range is the "
              f"caps measured; the device allows [{cal.limits.min_w:g}, {cal.limits.max_w:g}] W.")
    profile = PowerProfile(
        name=name, min_w=lo, max_w=hi, default_w=min(hi, max(lo, cal.limits.default_w)),
        idle_w=cal.idle_w,
        points=tuple(points), source=source)
    return profile, notes


def render(cal: Calibration) -> str:
    lines = [f"calibration of {cal.device} ({cal.torch_device}, {cal.family}); idle {cal.idle_w:.1f} W",
             f"{'requested_w':>11} {'enforced_w':>10} {'drawn_w':>8} {'energy_j':>9} {'steps/s':>9}"]
    lines += [f"{r.requested_w:>11g} {r.enforced_w:>10g} {r.mean_power_w:>8.1f} {r.energy_j:>9.1f} "
              f"{r.steps_per_s:>9.2f}" for r in cal.rows]
    return "\n".join(lines)
