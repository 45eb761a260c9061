"""A simulated program for :mod:`testbed.power.throttle.quota_control`, in simulated time: a process that
runs steps on its own (the controller cannot pace it), in a cgroup whose CPU quota works as CFS
bandwidth control does.

A step costs ``cost_s`` of CPU; the process gets ``share`` of a core (other load takes the rest)
and, in each ``period_s``, at most ``quota x period_s`` of CPU. ``pace``: the program sleeps so
that a step starts at most every ``1/pace`` s (a program that paces itself). The agent reads the
program's step counter every ``observe_s`` (its progress lines as it sees them).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from testbed.power.throttle.quota_control import QuotaController
from tests.unit.power.rate_plant import apply_due_events


@dataclass
class Program:
    cost_s: float = 0.005
    share: float = 1.0
    pace: float | None = None
    period_s: float = 0.1
    dt_s: float = 0.001
    observe_s: float = 0.05
    t_s: float = 0.0
    step: int = 0
    _done_cpu_s: float = 0.0      # CPU spent on the current step
    _used_s: float = 0.0          # CPU used in the current quota period
    _period_end_s: float = 0.0
    _step_start_s: float = -1e9
    _in_step: bool = False
    _next_observe_s: float = 0.0
    starts: list[float] = field(default_factory=list)
    steps_at: list[tuple[float, int]] = field(default_factory=list)

    def run(self, ctl: QuotaController | None, until_s: float, events: dict[float, dict] | None = None) -> None:
        pending = sorted((events or {}).items())
        while self.t_s < until_s:
            apply_due_events(pending, self, ctl)
            if ctl is not None and self.t_s >= self._next_observe_s:
                ctl.observe(self.t_s, self.step)
                self._next_observe_s = self.t_s + self.observe_s
            quota = ctl.quota_cores() if ctl is not None else None
            if self.t_s >= self._period_end_s:
                self._used_s, self._period_end_s = 0.0, self.t_s + self.period_s
            cpu = self.share * self.dt_s
            if quota is not None:
                cpu = min(cpu, max(0.0, quota * self.period_s - self._used_s))
            if not self._in_step:
                if self.pace is not None and self.t_s < self._step_start_s + 1.0 / self.pace:
                    cpu = 0.0  # sleeping until its own pace lets the next step start
                else:
                    self._in_step, self._step_start_s = True, self.t_s
            self._used_s += cpu
            self._done_cpu_s += cpu
            self.t_s += self.dt_s
            if self._done_cpu_s >= self.cost_s - 1e-12:
                self._done_cpu_s, self._in_step = 0.0, False
                self.step += 1
                self.steps_at.append((self.t_s, self.step))

    def rate(self, t0: float, t1: float) -> float:
        n = sum(1 for t, _ in self.steps_at if t0 <= t < t1)
        return n / (t1 - t0)

    def unthrottled_rate(self, *, seconds: float = 4.0) -> float:
        """The same program with no quota, from now, in a copy (the reference to compare with)."""
        twin = Program(cost_s=self.cost_s, share=self.share, pace=self.pace, period_s=self.period_s,
                       dt_s=self.dt_s, t_s=0.0)
        twin.run(None, seconds)
        return twin.rate(1.0, seconds)
