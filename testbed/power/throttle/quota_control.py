"""Closed-loop CPU quota for a program the agent does not pace step by step (a user's training
program): it runs at ``frac`` of its *current* unthrottled rate, measured from its own progress.

:mod:`testbed.power.throttle.rate_control` steers a loop that asks it when to start each step. A user's
program runs on its own; all the agent sees is the step numbers it reports (its progress lines, at
the times the agent reads them), and all it can turn is the CPU quota of the cgroup that holds the
program's processes. So:

**Quota (integral action on the step count, gain on the rate error).** A schedule owes the program
``target_steps_per_s`` steps per second since ``frac`` was set; ``debt`` = steps owed - steps done
(capped at ``max_backlog_s`` of schedule either way). Every ``control_period_s`` (longer for a
slow program: ``min_window_steps`` steps) the controller measures the rate since its previous
update, so under the quota that update wrote and nothing older (a quota change shows in the rate
at once; a window reaching further back makes the loop wind up and overshoot), asks for
``target + debt / horizon_s`` and scales the quota multiplicatively: ``quota *= (wanted /
measured) ** gain``, each update clipped to ``[1/max_ratio, max_ratio]`` and the quota to
``[quota_min_cores, cores_max]``. It needs only that more quota never means fewer steps: a real
program's rate is far from proportional to its quota (the example at 0.5 and 0.25 cores: 620 and
180 steps/s, with 700 unthrottled on a busy 2-core host), and whatever a step costs, a change of
cost or of other load shows up as a rate error and is corrected the same way. The target moves
with it only at the next probe (below).
A quota above what the program uses changes nothing (a program that paces itself): the loop
walks the quota down until it bites.

**Reference (what frac is a fraction of), re-estimated during the run.** While ``frac`` is 1 the
program runs unthrottled and its measured rate *is* the reference. While throttled, every
``probe_every_s`` the quota is lifted for a *probe* (at least ``probe_s`` and ``probe_min_steps``
steps, at most ``probe_max_s``), its rate measured from the first step seen after the lift (the
step the quota held is not counted) and blended into the reference (``ref_ewma``); then the
quota in force before the probe comes back, and the schedule pays the probe's extra steps back.

**The enforced fraction** (:class:`~testbed.power.throttle.rate_control.Window`): steps advanced since
``frac`` was set over the integral of the reference rate over that time; measured, the time the
program was stopped for a checkpoint (:meth:`hold` .. :meth:`release`) left out.

Pure arithmetic over the times and step numbers passed in (no clock, no sleeping), so a simulated
plant tests it in simulated time (``tests/unit/power/test_quota_control.py``).
"""

from __future__ import annotations

import dataclasses
from collections import deque
from dataclasses import dataclass

from testbed.power.throttle.rate_control import Window

FREE, CONTROL, PROBE = "free", "control", "probe"


@dataclass(frozen=True)
class QuotaSettings:
    control_period_s: float = 0.25   # at least this long between two quota updates ...
    min_window_steps: int = 4        # ... and this many steps
    gain: float = 0.5                # exponent of the multiplicative update
    max_ratio: float = 2.0           # the most one update changes the quota by
    horizon_s: float = 1.0           # the schedule's debt is asked back over this
    max_backlog_s: float = 1.0       # the most schedule owed either way
    quota_min_cores: float = 0.01    # the kernel's floor is 1 ms per period; a bit above it
    probe_every_s: float = 4.0       # throttled time between two probes of the unthrottled rate
    probe_s: float = 0.4             # a probe lasts at least this long ...
    probe_min_steps: int = 4         # ... and this many steps (after the first one seen)
    probe_max_s: float = 3.0         # ... and at most this long (a program that stalled)
    ref_ewma: float = 0.5            # weight of a probe against the previous reference
    free_window_s: float = 2.0       # while unthrottled, the reference is the rate over this


@dataclass
class _Probe:
    started_s: float
    first: tuple[float, int] | None = None  # (time, step) of the first step seen after the lift
    last: tuple[float, int] | None = None


class QuotaController:
    """``cores_max``: the CPU the program could use at most (the host's cores); the quota never
    asks for more. ``initial_reference_steps_per_s``: the reference until one is measured."""

    def __init__(self, now_s: float, *, cores_max: float, settings: QuotaSettings | None = None,
                 initial_reference_steps_per_s: float | None = None):
        if not cores_max > 0:
            raise ValueError(f"cores_max must be > 0, got {cores_max!r}")
        self.settings = settings or QuotaSettings()
        self.cores_max = float(cores_max)
        self.frac = 1.0
        self.mode = FREE
        self.reference_steps_per_s: float | None = initial_reference_steps_per_s
        self.quota: float = self.cores_max       # the quota in force while controlling (cores)
        self._samples: deque[tuple[float, int]] = deque()  # (time, step) as observed
        self._last: tuple[float, int] | None = None
        self._debt = 0.0
        self._t_debt = now_s
        self._since: tuple[float, int] | None = None  # (time, step) at the last quota update
        self._throttled_since = now_s
        self._probe: _Probe | None = None
        self._window = Window()
        self._held = False
        self.probes = 0
        self.probe_log: list[tuple[float, float, float]] = []  # (start_s, end_s, measured steps/s)
        self.cpu_cores_free: float | None = None  # CPU the program used unthrottled (for the first quota)

    # -- what the agent passes in ----------------------------------------------------------------
    def observe(self, now_s: float, step: int, *, cpu_s: float | None = None) -> None:
        """The latest step the program reported, read at ``now_s`` (``cpu_s``: its processes' CPU
        seconds so far, where known). Call it often (every few tens of ms) whether or not it moved."""
        if self._held:
            return
        step = int(step)
        prev = self._last
        if prev is not None and step < prev[1]:  # a restart from an older checkpoint: a new baseline
            self._samples.clear()
            self._window.last_start_s = None
            prev = None
        self._track_cpu(now_s, cpu_s)
        self._accrue(now_s)
        if prev is None or step != prev[1]:
            if prev is not None:
                self._book(now_s, step - prev[1])
            else:
                self._window.last_start_s = now_s
            self._samples.append((now_s, step))
            if self.mode != FREE:
                self._debt -= step - prev[1] if prev is not None else 0
                self._clip_debt()
            if self.mode == PROBE and self._probe is not None:
                p = self._probe
                if p.first is None:
                    p.first = (now_s, step)
                else:
                    p.last = (now_s, step)
        self._last = (now_s, step)
        self._trim(now_s)
        if self.mode == FREE:
            r = self._rate(now_s, self.settings.free_window_s, min_steps=3)
            if r is not None:
                self.reference_steps_per_s = r
        elif self.mode == PROBE:
            self._maybe_end_probe(now_s)
        else:
            self._maybe_probe(now_s)
            if self.mode == CONTROL:
                self._update(now_s)

    def quota_cores(self) -> float | None:
        """The CPU ceiling to write (None: unlimited)."""
        return self.quota if self.mode == CONTROL else None

    @property
    def target_steps_per_s(self) -> float | None:
        ref = self.reference_steps_per_s
        return None if ref is None or self.mode == FREE else self.frac * ref

    # -- what the owner sets and reads -------------------------------------------------------------
    def set_frac(self, frac: float, now_s: float) -> None:
        if not 0 < frac <= 1:
            raise ValueError(f"frac must be in (0, 1], got {frac!r}")
        frac = float(frac)
        if frac != self.frac:
            self._window = Window(frac, last_start_s=now_s if self._last is not None else None)
        if frac >= 1.0:
            self.mode, self._probe = FREE, None
        else:
            if self.mode == FREE:
                self._debt, self._t_debt = 0.0, now_s
                self._throttled_since = now_s
                self._since = None
                self.quota = self._first_quota(frac)
                self.mode = CONTROL
                if self.reference_steps_per_s is None:  # nothing to aim at yet: measure it first
                    self.mode, self._probe = PROBE, _Probe(now_s)
            elif frac != self.frac:
                self.quota = min(self.cores_max, max(self.settings.quota_min_cores, self.quota * frac / self.frac))
                self._debt, self._since = 0.0, None
        self.frac = frac

    def hold(self, now_s: float) -> None:
        """The program is stopped (a checkpoint): nothing is measured or owed until :meth:`release`."""
        self._held = True
        self._last = None
        self._samples.clear()
        self._window.last_start_s = None
        if self.mode == PROBE:
            self.mode, self._probe = CONTROL, None

    def release(self, now_s: float) -> None:
        if not self._held:
            return
        self._held = False
        self._t_debt = now_s
        self._debt = 0.0
        self._throttled_since = now_s
        self._cpu_last = None
        self._since = None

    def window(self) -> Window:
        """What was achieved since the current ``frac`` was set (a copy)."""
        return dataclasses.replace(self._window)

    def describe(self) -> dict:
        return {"mode": self.mode, "frac": self.frac, "reference_steps_per_s": self.reference_steps_per_s,
                "target_steps_per_s": self.target_steps_per_s, "quota_cores": self.quota_cores(),
                "debt_steps": self._debt, "probes": self.probes}

    # -- internals -----------------------------------------------------------------------------------
    _cpu_last: tuple[float, float] | None = None

    def _track_cpu(self, now_s: float, cpu_s: float | None) -> None:
        if cpu_s is None:
            return
        last, self._cpu_last = self._cpu_last, (now_s, cpu_s)
        if self.mode == FREE and last is not None and now_s - last[0] > 0 and cpu_s >= last[1]:
            used = (cpu_s - last[1]) / (now_s - last[0])
            c = self.cpu_cores_free
            self.cpu_cores_free = used if c is None else 0.9 * c + 0.1 * used

    def _first_quota(self, frac: float) -> float:
        """The CPU it used unthrottled times ``frac`` (the loop corrects the rest), else frac of the host."""
        used = self.cpu_cores_free if self.cpu_cores_free else self.cores_max
        return min(self.cores_max, max(self.settings.quota_min_cores, frac * used))

    def _accrue(self, now_s: float) -> None:
        dt = max(0.0, now_s - self._t_debt)
        self._t_debt = max(self._t_debt, now_s)
        target = self.target_steps_per_s
        if self.mode != FREE and target:
            self._debt += dt * target
            self._clip_debt()

    def _clip_debt(self) -> None:
        target = self.target_steps_per_s
        if target:
            cap = max(1.0, target * self.settings.max_backlog_s)
            self._debt = min(cap, max(-cap, self._debt))

    def _book(self, now_s: float, advanced: int) -> None:
        w = self._window
        if w.last_start_s is None or advanced <= 0:
            w.last_start_s = now_s
            return
        dt = max(0.0, now_s - w.last_start_s)
        w.steps += advanced
        w.intervals += advanced
        w.seconds += dt
        # unthrottled, the program runs at the reference by definition: enforced 1
        w.reference_steps += advanced if self.frac >= 1.0 else dt * (self.reference_steps_per_s or 0.0)
        w.last_start_s = now_s

    def _trim(self, now_s: float) -> None:
        keep = self.settings.free_window_s * 4 + 1.0
        target = self.target_steps_per_s
        if target:
            keep = max(keep, 4 * self.settings.min_window_steps / target)
        while len(self._samples) > 2 and now_s - self._samples[1][0] > keep:
            self._samples.popleft()

    def _rate(self, now_s: float, window_s: float, *, min_steps: int) -> float | None:
        """Steps per second between the oldest observed change within the last ``window_s`` and
        the newest (None: fewer than ``min_steps`` steps between them)."""
        if len(self._samples) < 2:
            return None
        t_new, s_new = self._samples[-1]
        t0, s0 = t_new, s_new
        for t, s in reversed(self._samples):
            if now_s - t > window_s:
                break
            t0, s0 = t, s
        if s_new - s0 < min_steps or t_new <= t0:
            return None
        return (s_new - s0) / (t_new - t0)

    def _update(self, now_s: float) -> None:
        """One quota step, from the rate measured since the previous one (the quota in force all
        that time, so each update sees its own effect and nothing older): once that span holds
        ``control_period_s`` and ``min_window_steps`` steps (or twice the time those steps take
        at the target, for a program the quota starves)."""
        s = self.settings
        target = self.target_steps_per_s
        if not target or self._last is None:
            return
        if self._since is None:
            self._since = self._last
            return
        t_u, step_u = self._since
        span, steps = now_s - t_u, self._last[1] - step_u
        if span < s.control_period_s:
            return
        if steps < s.min_window_steps and span < max(s.control_period_s, 2.0 * s.min_window_steps / target):
            return
        measured = steps / span
        wanted = max(0.1 * target, target + self._debt / s.horizon_s)
        ratio = s.max_ratio if measured <= 0 else (wanted / measured) ** s.gain
        ratio = min(s.max_ratio, max(1.0 / s.max_ratio, ratio))
        self.quota = min(self.cores_max, max(s.quota_min_cores, self.quota * ratio))
        self._since = self._last

    def _maybe_probe(self, now_s: float) -> None:
        if now_s - self._throttled_since >= self.settings.probe_every_s:
            self.mode, self._probe = PROBE, _Probe(now_s)

    def _maybe_end_probe(self, now_s: float) -> None:
        p, s = self._probe, self.settings
        if p is None:
            return
        measured = None
        if p.first is not None and p.last is not None:
            steps, span = p.last[1] - p.first[1], p.last[0] - p.first[0]
            if steps >= s.probe_min_steps and now_s - p.started_s >= s.probe_s and span > 0:
                measured = steps / span
            elif now_s - p.started_s < s.probe_max_s:
                return
            elif steps >= 2 and span > 0:
                measured = steps / span
        elif now_s - p.started_s < s.probe_max_s:
            return
        self.mode, self._probe = CONTROL, None
        self._throttled_since = now_s
        self._since = None  # the probe's fast steps say nothing about the quota in force
        if measured is not None:
            ref = self.reference_steps_per_s
            a = s.ref_ewma
            self.reference_steps_per_s = measured if ref is None else (1 - a) * ref + a * measured
            self.probes += 1
            self.probe_log.append((p.started_s, now_s, measured))


__all__ = ["CONTROL", "FREE", "PROBE", "QuotaController", "QuotaSettings"]
