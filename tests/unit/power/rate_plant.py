"""A simulated plant for :mod:`testbed.power.throttle.rate_control`: a step loop on a CPU, in simulated time.

The thread gets ``share`` of a core (other load takes the rest); a step costs ``cost_s`` of CPU,
``cold`` more when it starts after an idle gap (cold caches after a sleep). A CPU quota works as
CFS bandwidth control does: in each ``period_s`` the thread may use ``quota x period_s`` of CPU,
then it is stopped until the next period; the time stopped is reported as ``stalled_s``, as a
cgroup's cpu.stat would. Nothing here reads a clock or sleeps.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from testbed.power.throttle.rate_control import RateController


def apply_due_events(pending: list[tuple[float, dict]], plant, ctl) -> None:
    """Apply the events due at ``plant.t_s`` (sorted ``(time_s, {field: value})``): ``frac`` goes to
    the controller, any other field to the plant."""
    while pending and pending[0][0] <= plant.t_s:
        for k, v in pending.pop(0)[1].items():
            if k == "frac":
                ctl.set_frac(v, plant.t_s)
            else:
                setattr(plant, k, v)


@dataclass
class Plant:
    cost_s: float = 0.005
    share: float = 1.0
    cold: float = 0.0
    use_quota: bool = True
    period_s: float = 0.1
    _used_s: float = 0.0    # CPU used in the current quota period
    _period_end_s: float = 0.0
    t_s: float = 0.0
    ends: list[float] = field(default_factory=list)   # step end times
    last_end_s: float = -1.0

    def run(self, ctl: RateController, until_s: float, events: dict[float, dict] | None = None) -> None:
        pending = sorted((events or {}).items())
        while self.t_s < until_s:
            apply_due_events(pending, self, ctl)
            d = ctl.delay_s(self.t_s)
            if d > 0:
                nxt = pending[0][0] if pending else until_s
                self.t_s = min(self.t_s + max(d, 1e-7), max(nxt, self.t_s + 1e-7))
                continue
            ctl.step_started(self.t_s)
            cost = self.cost_s * (1 + self.cold if self.t_s - self.last_end_s > 1e-3 else 1.0)
            q = ctl.quota_cores() if self.use_quota else None
            t0, stalled = self.t_s, 0.0
            left = cost
            while left > 1e-12:
                if self.t_s >= self._period_end_s:  # a new period: its quota is fresh
                    self._period_end_s = max(self._period_end_s + self.period_s,
                                             (self.t_s // self.period_s + 1) * self.period_s)
                    if self._period_end_s <= self.t_s:
                        self._period_end_s = self.t_s + self.period_s
                    self._used_s = 0.0
                end = self._period_end_s
                allowed = left if q is None else min(left, q * self.period_s - self._used_s)
                if allowed <= 1e-12:  # quota spent: stopped until the next period
                    stalled += end - self.t_s
                    self.t_s = end
                    continue
                run = min(allowed / self.share, end - self.t_s)
                self.t_s += run
                self._used_s += run * self.share
                left -= run * self.share
            wall = self.t_s - t0
            self.last_end_s = self.t_s
            self.ends.append(self.t_s)
            ctl.step_finished(self.t_s, wall_s=wall, cpu_s=cost, stalled_s=stalled)

    def rate(self, t0: float, t1: float) -> float:
        """Steps per second that ended in [t0, t1)."""
        return sum(1 for t in self.ends if t0 <= t < t1) / (t1 - t0)
