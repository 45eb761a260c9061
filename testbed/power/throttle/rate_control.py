"""Closed-loop throughput control: a step loop runs at ``frac`` of its *current* unthrottled rate.

An open-loop CPU quota (``frac`` x the CPU a step needs) does not give ``frac`` x the throughput:
the per-step cost changes under throttling (cold caches after a sleep) and with other load on the
host, and the unthrottled rate it is a fraction *of* drifts too. So the loop that trains asks this
controller, step by step, when to start the next one, and reports what each step took. Three parts:

**Schedule (integral action on the step count).** The controller owes the loop
``target_steps_per_s`` steps per second: a credit grows by that rate and each started step spends
one. The loop sleeps until the credit reaches one step. A loop that fell behind (a slow step, a
kernel stall) catches up, by at most ``max_backlog_s`` of schedule (no burst after a long stall);
a loop that ran ahead (a probe, below) pays it back by waiting. Over any window longer than a few
steps the achieved rate is the target, as long as the job can run faster than the target.

**Reference (what frac is a fraction of), re-estimated all the time.**

- *anchor*: the rate measured while the loop ran unthrottled (``frac`` 1, or a probe), steps back
  to back: the only direct measurement of the reference;
- *tracking*: between anchors, every paced step's own duration (wall time, less any time the kernel
  held it in a CPU quota, ``stalled_s``) is the cost of a step on this host now: more CPU per step,
  or less CPU left by other load, both make it longer. The reference follows
  ``anchor_rate x anchor_step_s / step_s`` (the mean of the paced steps right after the anchor, and
  an average over the last ``step_tau_s`` of paced steps), so a cost change moves the target
  within about a second (one step counts at most twice the average, so a single odd step
  does not swing it). Paced steps are slower than back-to-back ones (cold caches after
  every sleep); taking the paced step time at the anchor as its denominator cancels that bias;
- *probes*: after ``probe_every_s`` of continuous throttling the loop runs unthrottled for
  ``probe_s`` (at least ``probe_min_steps``) and re-anchors. The probe's extra steps are paid back
  by the schedule right after, so the mean rate over a probe cycle stays the target. Not needed
  (skipped) where a pace ceiling, not the host, sets the reference (a step far shorter than the
  ceiling's period).

**CPU quota (optional, for a cgroup throttle).** ``quota_cores`` is the CPU the target needs
(``target x cpu_s_per_step``) times a headroom that the loop raises while it is behind schedule
(the kernel must not hold it under the target) and lets fall back towards ``headroom_min`` while
it keeps up. Unlimited (None) when unthrottled or probing.

Pure arithmetic over the times the loop passes in (no clock, no sleeping), so a simulated plant
tests it in simulated time (``tests/unit/power/test_rate_control.py``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

FREE, PACED, PROBE = "free", "paced", "probe"


@dataclass(frozen=True)
class RateSettings:
    probe_every_s: float = 8.0     # throttled time between two probes of the unthrottled rate
    probe_s: float = 0.2           # a probe lasts at least this long ...
    probe_min_steps: int = 5       # ... and this many steps (the first one is not counted)
    max_backlog_s: float = 0.5     # the most schedule a late loop may catch up
    step_tau_s: float = 0.5        # time constant of the paced step-time average
    step_ewma: float = 0.15        # weight of the newest step in the CPU-per-step average
    anchor_steps: int = 5          # paced steps after an anchor (the first skipped) that make its step
    anchor_s: float = 0.3          # time ... and at least this long
    ref_ewma: float = 0.5          # weight of a new anchor against the previous reference
    headroom_min: float = 1.25     # CPU quota over what the target needs, when on schedule
    headroom_max: float = 4.0
    headroom_gain: float = 1.05    # per step while more than a step behind schedule
    headroom_decay: float = 0.995  # per step while on schedule
    skip_probe_ratio: float = 0.5  # no probes while a step takes < this x the ceiling's period


@dataclass
class Window:
    """What the loop achieved while one ``frac`` was in force: step intervals (from one step's start
    to the next, paused time left out), their wall seconds and the integral of the reference rate
    over them. ``enforced_frac`` = intervals / that integral: measured, and free of the phase error
    a count of steps in a short window has. Starts, not ends: a step the kernel stopped delays the
    next start just as much, but one late end does not make the interval after it look short."""

    frac: float = 1.0
    steps: int = 0
    intervals: int = 0
    seconds: float = 0.0
    reference_steps: float = 0.0  # integral of reference_steps_per_s dt over the intervals
    last_start_s: float | None = None

    @property
    def steps_per_s(self) -> float | None:
        return self.intervals / self.seconds if self.seconds > 0 else None

    @property
    def enforced_frac(self) -> float | None:
        return self.intervals / self.reference_steps if self.reference_steps > 0 else None

    def as_dict(self) -> dict:
        return {"requested_frac": self.frac, "window_s": self.seconds, "window_steps": self.steps,
                "window_intervals": self.intervals, "measured_steps_per_s": self.steps_per_s,
                "enforced_frac": self.enforced_frac}


@dataclass
class _Probe:
    started_s: float
    first_end_s: float | None = None
    last_start_s: float | None = None
    steps: int = 0  # finished, the first one included


class RateController:
    """``ceiling_steps_per_s``: the loop never runs faster than this (an agent's reference pace);
    None: unthrottled means steps back to back (a bench worker). ``initial_reference_steps_per_s``:
    the reference until the first measurement (default: the ceiling)."""

    def __init__(self, now_s: float, *, ceiling_steps_per_s: float | None = None,
                 initial_reference_steps_per_s: float | None = None,
                 settings: RateSettings | None = None):
        if ceiling_steps_per_s is not None and not ceiling_steps_per_s > 0:
            raise ValueError(f"ceiling_steps_per_s must be > 0, got {ceiling_steps_per_s!r}")
        self.settings = settings or RateSettings()
        self.ceiling = ceiling_steps_per_s
        self.frac = 1.0
        self.mode = FREE
        ref0 = initial_reference_steps_per_s or ceiling_steps_per_s
        self._ref_anchor: float | None = ref0   # steps/s measured unthrottled (or assumed)
        self._anchor_step_s: float | None = None  # paced step time that goes with the anchor
        self._anchor_n = 0
        self._anchor_sum_s = 0.0
        self._anchor_t0_s = now_s
        self._last_paced_end_s: float | None = None
        self._step_s: float | None = None         # EWMA of paced steps' unstalled wall time
        self._free_step_s: float | None = None    # EWMA of unthrottled steps' wall time
        self.cpu_s_per_step: float | None = None
        self.headroom = self.settings.headroom_min
        self._credit = 1.0
        self._t_credit = now_s
        self._next_free_s = now_s
        self._throttled_since = now_s
        self._free_window: _Probe | None = _Probe(now_s)
        self._probe: _Probe | None = None
        self._window = Window()
        self._held_since: float | None = None
        self.probes = 0
        self.probe_log: list[tuple[float, float, float]] = []  # (start_s, end_s, measured steps/s)

    # -- what the loop asks --------------------------------------------------------------------
    @property
    def natural_steps_per_s(self) -> float | None:
        """How fast the loop would run back to back now (the anchor, tracked by step times)."""
        ref = self._ref_anchor
        if ref is not None and self._anchor_step_s is not None and self._step_s is not None:
            ref *= self._anchor_step_s / self._step_s
        return ref

    @property
    def reference_steps_per_s(self) -> float | None:
        """The unthrottled rate now (None before anything was measured or assumed): the natural
        rate, or the ceiling where that is lower."""
        ref = self.natural_steps_per_s
        if ref is None:
            return None
        return min(ref, self.ceiling) if self.ceiling is not None else ref

    @property
    def target_steps_per_s(self) -> float | None:
        ref = self.reference_steps_per_s
        return None if ref is None else self.frac * ref

    def delay_s(self, now_s: float) -> float:
        """Seconds to wait before the next step may start (0: start it now)."""
        self._maybe_probe(now_s)
        self._accrue(now_s)
        target = self.target_steps_per_s
        if self.mode == PACED and target:
            return 0.0 if self._credit >= 1.0 else (1.0 - self._credit) / target
        return max(0.0, self._next_free_s - now_s)  # free or probing: the ceiling's pace, if any

    def step_started(self, now_s: float) -> None:
        first = self._window.last_start_s is None  # of a new frac (or after a pause): the schedule starts here
        self._book_start(now_s)
        self._accrue(now_s)
        if first and self.mode == PACED:
            self._credit = min(self._credit, 1.0)
        if self.mode != FREE:
            self._credit -= 1.0
        if self.ceiling is not None:
            self._next_free_s = now_s + 1.0 / self.ceiling

    def step_finished(self, now_s: float, *, wall_s: float, cpu_s: float | None = None,
                      stalled_s: float = 0.0) -> None:
        """One step ended at ``now_s``: it took ``wall_s`` (of which the kernel's CPU quota held it
        ``stalled_s``) and ``cpu_s`` of CPU."""
        s = self.settings
        if cpu_s is not None and cpu_s >= 0:
            c = self.cpu_s_per_step
            self.cpu_s_per_step = cpu_s if c is None else (1 - s.step_ewma) * c + s.step_ewma * cpu_s
        run_s = max(wall_s - max(stalled_s, 0.0), 1e-9)
        if self.mode == PACED:
            gap = now_s - self._last_paced_end_s if self._last_paced_end_s is not None else s.step_tau_s
            self._last_paced_end_s = now_s
            if self._step_s is None:
                self._step_s = run_s
            else:  # one odd step (a page fault storm, a preemption) moves the average at most 2x its weight
                clipped = min(max(run_s, 0.5 * self._step_s), 2.0 * self._step_s)
                a = min(0.5, max(gap, 0.0) / s.step_tau_s)
                self._step_s = (1 - a) * self._step_s + a * clipped
            if self._anchor_step_s is None and self._ref_anchor is not None:
                if self._anchor_n == 0:  # the first paced step (right after unthrottled ones) is not typical
                    self._anchor_t0_s = now_s
                else:
                    self._anchor_sum_s += run_s
                self._anchor_n += 1
                if self._anchor_n > s.anchor_steps and now_s - self._anchor_t0_s >= s.anchor_s:
                    self._anchor_step_s = self._step_s = self._anchor_sum_s / (self._anchor_n - 1)
            behind = self._credit > 1.0 + 1e-9
            self.headroom = min(s.headroom_max, self.headroom * s.headroom_gain) if behind else \
                max(s.headroom_min, self.headroom * s.headroom_decay)
        else:
            f = self._free_step_s
            self._free_step_s = run_s if f is None else (1 - s.step_ewma) * f + s.step_ewma * run_s
            w = self._probe if self.mode == PROBE else self._free_window
            if w is not None:
                w.steps += 1
                if w.first_end_s is None:
                    w.first_end_s = now_s
                w.last_end_s = now_s
            if self.mode == PROBE:
                self._maybe_end_probe(now_s)

    def quota_cores(self) -> float | None:
        """The CPU ceiling for a cgroup throttle (None: unlimited)."""
        target = self.target_steps_per_s
        if self.mode != PACED or target is None or self.cpu_s_per_step is None:
            return None
        return self.headroom * target * self.cpu_s_per_step

    # -- what the owner sets and reads -----------------------------------------------------------
    def set_frac(self, frac: float, now_s: float) -> None:
        if not 0 < frac <= 1:
            raise ValueError(f"frac must be in (0, 1], got {frac!r}")
        if float(frac) != self.frac:
            self._window = Window(float(frac))
        if frac >= 1.0:
            if self.mode != FREE:
                self._probe = None
                self.mode = FREE
                self._free_window = _Probe(now_s)
        elif self.mode == FREE:
            self._close_free_window()
            self.mode = PACED
            self._throttled_since = now_s
            self._credit, self._t_credit = 1.0, now_s
            if self._ref_anchor is None:  # nothing to pace against yet: measure it first
                self.mode, self._probe = PROBE, _Probe(now_s)
        self.frac = float(frac)

    def hold(self, now_s: float) -> None:
        """The loop is paused (not throttled: a migration): the time until :meth:`release` is in no
        window and earns no schedule."""
        self._held_since = now_s
        self._window.last_start_s = None  # the interval across the pause is not counted

    def release(self, now_s: float) -> None:
        if self._held_since is None:
            return
        held = max(0.0, now_s - self._held_since)
        self._held_since = None
        self._t_credit = max(self._t_credit, now_s)
        self._throttled_since += held
        if self._probe is not None:  # a probe cut by a pause measures nothing
            self._probe = None
            self.mode = PACED
        if self._free_window is not None:
            self._free_window = _Probe(now_s)

    def window(self) -> Window:
        """What was achieved since the current ``frac`` was set (a copy)."""
        return dataclasses.replace(self._window)

    def describe(self) -> dict:
        return {"mode": self.mode, "frac": self.frac, "reference_steps_per_s": self.reference_steps_per_s,
                "target_steps_per_s": self.target_steps_per_s, "cpu_s_per_step": self.cpu_s_per_step,
                "quota_headroom": self.headroom, "probes": self.probes}

    # -- internals -------------------------------------------------------------------------------
    def _accrue(self, now_s: float) -> None:
        """The schedule's credit grows at the target while throttled (probes included, so that
        a probe's extra steps are paid back); a late loop catches up at most max_backlog_s."""
        dt = max(0.0, now_s - self._t_credit)
        self._t_credit = max(self._t_credit, now_s)
        target = self.target_steps_per_s
        if self.mode == FREE or not target:
            return
        self._credit += dt * target
        if self.mode == PACED:
            self._credit = min(self._credit, max(1.0, target * self.settings.max_backlog_s))

    def _book_start(self, now_s: float) -> None:
        w = self._window
        w.steps += 1
        if w.last_start_s is not None and now_s > w.last_start_s:
            dt = now_s - w.last_start_s
            w.intervals += 1
            w.seconds += dt
            # unthrottled, the loop runs at the reference by definition: enforced 1
            w.reference_steps += 1.0 if self.mode == FREE else dt * (self.reference_steps_per_s or 0.0)
        w.last_start_s = now_s

    def _probe_needed(self) -> bool:
        if self.ceiling is not None and self._step_s is not None and \
                self._step_s < self.settings.skip_probe_ratio / self.ceiling:
            return False
        return True

    def _maybe_probe(self, now_s: float) -> None:
        if self.mode == PACED and now_s - self._throttled_since >= self.settings.probe_every_s:
            if not self._probe_needed():
                self._throttled_since = now_s
                return
            self.mode = PROBE
            self._probe = _Probe(now_s)
        elif self.mode == PROBE and self._probe is not None and self._probe.steps == 0 and \
                now_s - self._probe.started_s > 10 * self.settings.probe_s + 1.0:
            self._end_probe(now_s, measured=None)  # the loop is stuck (paused): give up this probe

    def _maybe_end_probe(self, now_s: float) -> None:
        p, s = self._probe, self.settings
        if p is None or p.first_end_s is None or p.last_end_s is None:
            return
        if p.steps >= s.probe_min_steps and p.last_end_s - p.started_s >= s.probe_s:
            span = p.last_end_s - p.first_end_s
            self._end_probe(now_s, measured=(p.steps - 1) / span if span > 0 else None)

    def _end_probe(self, now_s: float, measured: float | None) -> None:
        p = self._probe
        self.mode = PACED
        self._probe = None
        self._throttled_since = now_s
        if measured is not None and p is not None:
            self._anchor(measured, blend=True)
            self.probes += 1
            self.probe_log.append((p.started_s, now_s, measured))

    def _close_free_window(self) -> None:
        w, self._free_window = self._free_window, None
        if w is not None and w.first_end_s is not None and w.last_end_s is not None and w.steps >= 3:
            span = w.last_end_s - w.first_end_s
            if span > 0:
                self._anchor((w.steps - 1) / span, blend=False)

    def _anchor(self, measured_steps_per_s: float, *, blend: bool) -> None:
        """A new direct measurement of the unthrottled rate (``blend``: a short probe, averaged
        with the tracked reference); the paced step time that goes with it is taken over the next
        few paced steps."""
        m = measured_steps_per_s
        if self.ceiling is not None and self._free_step_s:
            # paced at the ceiling, the steps' own length says how fast the host could go
            m = max(m, 1.0 / self._free_step_s)
        tracked = self.natural_steps_per_s
        if blend and tracked is not None:
            a = self.settings.ref_ewma
            m = (1 - a) * tracked + a * m
        self._ref_anchor = m
        self._anchor_step_s, self._anchor_n, self._anchor_sum_s, self._step_s = None, 0, 0.0, None
        self._last_paced_end_s = None


__all__ = ["FREE", "PACED", "PROBE", "RateController", "RateSettings", "Window"]
