"""``power.backend: emulated-throttle``: each running job's real training is slowed to the
profile's throughput fraction at its cap, by its node agent's closed-loop throttle
(:mod:`testbed.agent.runner`, :mod:`testbed.power.throttle.rate_control`; the substrate's
:class:`~testbed.power.caps.ThroughputPort`). What ``auto`` (the default) chooses where agents
train (``emulation.nodes: agents``).

The agent is asked what each job achieved under its cap: the *enforced* fraction, measured (step
intervals over the integral of the job's current unthrottled rate), over the wall time the cap has
been in force. From it the GPU's power is **derived** through the profile (``draw_at_frac_w``: the
draw of a GPU running at that measured speed) and recorded with ``power_basis: derived``: computed
from a measured throughput, not a power measurement.

Two ways to run a step (``mode``); the outcomes of a run (caps, progress, energy, migrations) are
the same, only the wall time and when the measurement is read differ:

- ``event`` (the default): a step costs a round trip only when something changes. The caps that
  changed go to their agents in one ``set_throughputs`` command per agent, the agents asked
  concurrently (:meth:`ThroughputPort.set_throughputs`); the answer carries what the previous cap
  achieved up to then. A cap that does not change is not sent. Nothing sleeps while the run goes
  on: a run's clock jumps over idle scenario time, so a cap may be in force for milliseconds of
  wall time and show no step interval at all. A step's measurement is therefore deferred
  (:meth:`settle_steps`) until the job's *span* (its windows since the last measurement) shows
  ``MIN_INTERVALS`` intervals: the span's achieved over requested steps (intervals over the
  integral of ``frac x`` the reference rate, summed over its windows) times each step's requested
  fraction is that step's enforced fraction (for a span of one window: the window's own enforced
  fraction). Windows are re-read (one concurrent round trip) once they have been in force for
  ``READ_EVERY_S`` wall seconds. On the run's last step whatever is pending is read, waiting (at most
  ``SETTLE_WAIT_S``, once per run) for a training job's span to show its intervals; a span left
  with none takes the job's previous span's ratio, else its steps are NaN (not measured).
- ``poll`` (the path before; ``testbed bench emulation`` runs it beside ``event``): every step asks
  every job's agent, one after another, and a cap in force for fewer than ``MIN_INTERVALS`` step
  intervals is polled (``POLL_S`` sleeps, at most ``SETTLE_WAIT_S`` per step).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from testbed import step_profile
from testbed.errors import TestbedError
from testbed.power.caps import (
    POWER_DERIVED, CapEnforcer, CapReport, Enforcement, JobCap, PowerSetup, Throttled, ThroughputPort,
)
from testbed.power.errors import PowerError
from testbed.power.backends import PowerBackend, register
from testbed.power.gpu.profile import PowerProfile

NAME = "emulated-throttle"
MIN_INTERVALS = 4     # step intervals a measured enforced fraction needs
SETTLE_WAIT_S = 1.0   # poll mode: the most one trace step waits for them (all jobs together)
POLL_S = 0.05
READ_EVERY_S = 1.0    # event mode: a deferred window is re-read once it has been in force this long (wall)
EVENT, POLL = "event", "poll"
MODES = (EVENT, POLL)
DEFAULT_MODE = EVENT  # what a run gets; testbed bench emulation sets POLL for its side-by-side runs


@dataclass
class _Held:
    """One job's cap as last sent (its *window*: what the agent measures since the cap was set)."""

    site: str
    frac: float
    cap_w: float
    report: CapReport
    since: float = 0.0                 # wall clock (monotonic) of the send or the last reading
    intervals: float = 0.0             # the window's latest reading: step intervals ...
    requested: float = 0.0             # ... and the steps asked for over them (frac x the reference's integral)
    seconds: float = 0.0
    used_intervals: float = 0.0        # what an earlier measurement took of this window already
    used_requested: float = 0.0
    used_seconds: float = 0.0
    training: bool = True


@dataclass
class _Span:
    """One job's steps awaiting a measurement, and what its closed windows achieved since the last one."""

    rows: list[tuple[float, str, float]] = field(default_factory=list)  # (step start, site, requested frac)
    intervals: float = 0.0
    requested: float = 0.0
    seconds: float = 0.0
    ratio: float | None = None   # the previous span's achieved / requested: a span that shows nothing takes it


class AgentThrottleCaps(CapEnforcer):
    name = NAME

    def __init__(self, port: ThroughputPort, profiles: dict[str, PowerProfile] | None = None, *,
                 mode: str | None = None, clock=time.monotonic):
        mode = mode or DEFAULT_MODE
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self._port = port
        self._profiles = profiles or {}
        self._held: dict[str, _Held] = {}
        self._spans: dict[str, _Span] = {}
        self._applied: list[str] = []
        self._resolved: list[tuple[float, str, Enforcement]] = []  # event mode: rows measured, not yet handed over
        self.settle_wait_s = SETTLE_WAIT_S
        self.mode = mode
        self._clock = clock

    # -- round trips ---------------------------------------------------------------------------------
    def _send(self, requests: list[tuple[str, str, float, float]]) -> dict[str, Throttled | TestbedError]:
        """Each ``(job, site, frac, cap_w)`` to its agent: one round trip where the port batches
        (concurrent agents), else one call per job."""
        if not requests:
            return {}
        batch = getattr(self._port, "set_throughputs", None)
        if batch is not None and self.mode == EVENT:
            return batch(requests)
        out: dict[str, Throttled | TestbedError] = {}
        for job_id, site, frac, cap_w in requests:
            try:
                out[job_id] = self._port.set_throughput(job_id, site, frac, cap_w)
            except TestbedError as e:
                out[job_id] = e
        return out

    def _enforcement(self, h: _Held, res: Throttled) -> tuple[Enforcement, dict]:
        """What ``res``'s window says of the cap ``h`` (none measured when it is another cap's)."""
        w = res.window or {}
        same = w.get("requested_frac") is not None and abs(w["requested_frac"] - h.frac) < 1e-9
        frac = w.get("enforced_frac") if same else None
        prof = self._profiles.get(h.site)
        power = prof.draw_at_frac_w(frac) if prof is not None and frac is not None else None
        return (Enforcement(frac, power, POWER_DERIVED, w.get("measured_steps_per_s") if same else None,
                            float(w.get("window_s") or 0.0) if same else 0.0), w if same else {})

    # -- event mode: spans -----------------------------------------------------------------------------
    def _read(self, h: _Held, res: Throttled) -> None:
        """Keep the latest reading of ``h``'s window (cumulative since the cap was set)."""
        w = self._enforcement(h, res)[1]
        if not w:
            return
        n = float(w.get("window_intervals") or 0)
        e = w.get("enforced_frac")
        if n > 0 and e:  # enforced = intervals / the reference's integral: requested = frac x that integral
            h.intervals, h.requested = n, h.frac * n / float(e)
        h.seconds = float(w.get("window_s") or 0.0)
        h.training = bool(w.get("training", True))

    def _span_now(self, job_id: str) -> tuple[float, float, float]:
        """The job's span so far: its closed windows and what its open one added since last used."""
        sp, h = self._spans[job_id], self._held.get(job_id)
        n, r, t = sp.intervals, sp.requested, sp.seconds
        if h is not None:
            n, r, t = n + h.intervals - h.used_intervals, r + h.requested - h.used_requested, t + h.seconds - h.used_seconds
        return n, r, t

    def _close_window(self, job_id: str) -> None:
        """The job's open window ended (a new cap, or the job left): its last reading joins the span."""
        sp, h = self._spans[job_id], self._held.get(job_id)
        if h is not None:
            sp.intervals += h.intervals - h.used_intervals
            sp.requested += h.requested - h.used_requested
            sp.seconds += h.seconds - h.used_seconds

    def _measure(self, job_id: str, force: bool = False) -> None:
        """File the span's rows once it shows MIN_INTERVALS intervals (``force``: whatever it shows; a
        span with none takes the previous span's ratio, else NaN)."""
        sp = self._spans.get(job_id)
        if sp is None or not sp.rows:
            return
        n, r, t = self._span_now(job_id)
        if n >= MIN_INTERVALS or (force and n > 0):
            ratio = n / r if r > 0 else None
        elif force:
            ratio = sp.ratio
        else:
            return
        for t_s, site, frac in sp.rows:
            enf = None if ratio is None else frac * ratio
            prof = self._profiles.get(site)
            power = prof.draw_at_frac_w(enf) if prof is not None and enf is not None else None
            self._resolved.append((t_s, job_id, Enforcement(enf, power, POWER_DERIVED, n / t if t > 0 else None, t)))
        sp.rows, sp.intervals, sp.requested, sp.seconds = [], 0.0, 0.0, 0.0
        sp.ratio = ratio if ratio is not None else sp.ratio
        h = self._held.get(job_id)
        if h is not None:
            h.used_intervals, h.used_requested, h.used_seconds = h.intervals, h.requested, h.seconds

    # -- the contract --------------------------------------------------------------------------------
    def apply(self, t_s: float, caps: dict[str, JobCap]) -> dict[str, CapReport]:
        if self.mode == POLL:
            return self._apply_poll(t_s, caps)
        out: dict[str, CapReport] = {}
        requests, wanted = [], {}
        for job_id, cap in caps.items():
            site = self._port.job_site(job_id, cap.site)
            frac = min(1.0, max(1e-6, cap.throughput_frac))
            prev = self._held.get(job_id)
            if prev is not None and prev.site == site and abs(prev.frac - frac) < 1e-9:
                out[job_id] = prev.report  # unchanged: not sent again, its window goes on
                continue
            requests.append((job_id, site, frac, cap.cap_w))
            wanted[job_id] = (site, frac, cap)
        answers = self._send(requests)
        for gone in set(self._held) - set(caps):  # left (finished, migrating): its window ends unread
            self._close_window(gone)
            del self._held[gone]
        now = self._clock()
        for job_id, (site, frac, cap) in wanted.items():
            res = answers.get(job_id)
            if isinstance(res, TestbedError):
                raise res
            if res is None:
                raise PowerError(f"power backend {NAME}: no answer for job {job_id} at t={t_s:g} s")
            prev = self._held.get(job_id)
            if prev is not None:  # the answer's window is the previous cap's, up to now (at the same agent)
                if prev.site == site:
                    self._read(prev, res)
                self._close_window(job_id)
            rep = CapReport(cap.cap_w, res.frac, NAME, res.throttle, None, res.reason)
            self._held[job_id] = _Held(site, frac, cap.cap_w, rep, since=now)
            out[job_id] = rep
        for job_id, cap in caps.items():
            sp = self._spans.setdefault(job_id, _Span())
            self._measure(job_id)  # closed windows may have brought the span its intervals
            h = self._held[job_id]
            sp.rows.append((t_s, h.site, h.frac))
        # a job away from caps (migrating) keeps its span: its destination's windows measure it, or the last step
        self._applied = list(caps)
        return out

    def leaving(self, t_s: float, job_ids: list[str], *, finished: bool) -> None:
        """Event mode: the leaving jobs' windows read in one concurrent round trip while they still
        run, and closed; a finished job's span is filed (a migrating one's goes on at its destination).
        A finished job whose windows never showed a step interval (it trained only while the clock
        jumped) is re-read until one shows, at most ``SETTLE_WAIT_S``: its only measurement."""
        if self.mode == POLL:
            return
        jobs = [j for j in job_ids if j in self._held and self._spans.get(j) and self._spans[j].rows]
        deadline = time.monotonic() + self.settle_wait_s
        ask = jobs
        while ask:
            answers = self._send([(j, self._held[j].site, self._held[j].frac, self._held[j].cap_w) for j in ask])
            for job_id in ask:
                h, res = self._held[job_id], answers.get(job_id)
                if isinstance(res, Throttled):
                    self._read(h, res)
                else:
                    h.training = False
            # a finished job never measured at all (no interval in any of its windows: it trained only
            # while the clock jumped) is given its first intervals, at most settle_wait_s
            ask = [j for j in ask if finished and self._held[j].training and self._spans[j].ratio is None
                   and self._span_now(j)[0] < 1]
            if not ask or time.monotonic() >= deadline:
                break
            with step_profile.part("sleep"):
                time.sleep(POLL_S)
        for job_id in jobs:
            self._close_window(job_id)
            del self._held[job_id]
            if finished:
                self._measure(job_id, force=True)
                del self._spans[job_id]
            else:
                self._measure(job_id)

    def settle_steps(self, t0_s: float, t1_s: float, final: bool = False) -> list[tuple[float, str, Enforcement]]:
        """Poll mode: :meth:`settle` (every job asked, waiting for enough intervals). Event mode: the
        rows measured so far, after one concurrent re-read of the windows whose jobs have rows pending
        and that have been in force ``READ_EVERY_S`` wall seconds since their last reading; on the
        ``final`` step every pending job is read, waiting at most ``SETTLE_WAIT_S`` (polling) while a
        training job's span shows fewer than ``MIN_INTERVALS`` intervals, and everything is filed."""
        if self.mode == POLL:
            return super().settle_steps(t0_s, t1_s, final)
        deadline = time.monotonic() + self.settle_wait_s  # a real wait: the training runs in wall time
        while True:
            now = self._clock()
            due = [j for j, h in self._held.items()
                   if self._spans.get(j) and self._spans[j].rows and (final or now - h.since >= READ_EVERY_S)]
            if not due:
                break
            answers = self._send([(j, self._held[j].site, self._held[j].frac, self._held[j].cap_w) for j in due])
            now = self._clock()
            for job_id in due:
                h, res = self._held[job_id], answers.get(job_id)
                h.since = now
                if isinstance(res, Throttled):
                    self._read(h, res)
                else:  # the job left its agent meanwhile: nothing more to read
                    h.training = False
                self._measure(job_id)
            if not final:
                break
            waiting = [j for j in due if self._spans[j].rows and self._held[j].training]
            if not waiting or time.monotonic() >= deadline:
                break
            with step_profile.part("sleep"):  # once per run: the last windows get their intervals
                time.sleep(POLL_S)
        if final:
            for job_id in list(self._spans):
                self._measure(job_id, force=True)
        rows, self._resolved = self._resolved, []
        return rows

    # -- poll mode: the path before (testbed bench emulation's side-by-side) ----------------------------
    def _apply_poll(self, t_s: float, caps: dict[str, JobCap]) -> dict[str, CapReport]:
        out = {}
        self._applied = list(caps)
        for job_id, cap in caps.items():
            site = self._port.job_site(job_id, cap.site)
            frac = min(1.0, max(1e-6, cap.throughput_frac))
            prev = self._held.get(job_id)
            if prev is not None and prev.site == site and abs(prev.frac - frac) < 1e-9:
                out[job_id] = prev.report  # unchanged: not sent again
                continue
            res = self._port.set_throughput(job_id, site, frac, cap.cap_w)
            rep = CapReport(cap.cap_w, res.frac, NAME, res.throttle, None, res.reason)
            self._held[job_id] = _Held(site, frac, cap.cap_w, rep)
            out[job_id] = rep
        for gone in set(self._held) - set(caps):
            del self._held[gone]
        return out

    def settle(self, t_s: float) -> dict[str, Enforcement]:
        """Poll mode: ask each job's agent what it achieved since its cap was set (re-asserting the
        same fraction, which changes nothing). A cap in force for fewer than MIN_INTERVALS steps of a
        training job is waited for (polling, at most SETTLE_WAIT_S for all jobs together): a
        run's clock may have jumped, and nothing can be measured in no time."""
        out: dict[str, Enforcement] = {}
        pending = [j for j in self._applied if j in self._held]
        deadline = time.monotonic() + self.settle_wait_s
        while pending:
            again = []
            for job_id in pending:
                h = self._held[job_id]
                try:
                    res = self._port.set_throughput(job_id, h.site, h.frac, h.cap_w)
                except TestbedError:  # the job left the agent meanwhile (finished, moved): nothing to read
                    continue
                enf, w = self._enforcement(h, res)
                if w and w.get("training") and (w.get("window_intervals") or 0) < MIN_INTERVALS:
                    again.append(job_id)
                out[job_id] = enf
            if not again or time.monotonic() >= deadline:
                break
            with step_profile.part("sleep"):
                time.sleep(POLL_S)
            pending = again
        return out


def _make(setup: PowerSetup) -> AgentThrottleCaps:
    from testbed.power.node_model import NodePower

    if setup.target.port is None:
        raise PowerError(f"power.backend {NAME}: this substrate has no training agents to throttle")
    sc = setup.scenario
    profiles = {s.name: NodePower.of(sc.node_type_of(s.name), s.name).profile for s in sc.sites}
    return AgentThrottleCaps(setup.target.port, profiles)


register(PowerBackend(
    NAME, _make, frozenset({"agents"}),
    refusal=f"{NAME} slows real training, which runs only on agents: use --substrate netns with "
            "emulation.nodes: agents, or backend: auto",
    description="the node agent's closed-loop throttle slows real training to the profile's throughput at "
                "the cap; the enforced fraction is measured and the GPU power derived from it",
    emulation_rank=10,
))
