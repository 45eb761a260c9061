"""``power.backend: emulated-throttle``: each running job's real training is slowed to the
profile's throughput fraction at its cap, by its node agent's closed-loop throttle
(:mod:`testbed.agent.runner`, :mod:`testbed.power.rate_control`; the substrate's
:class:`~testbed.power.caps.ThroughputPort`). What ``emulated`` (the default) chooses where agents
train (``emulation.nodes: agents``).

After each trace step (:meth:`AgentThrottleCaps.settle`) the agent is asked what the job achieved:
the *enforced* fraction, measured (step intervals over the integral of the job's current
unthrottled rate), over the wall time the cap has been in force (a run's clock may jump over idle
scenario time, so one trace step can be milliseconds of wall time: too short to measure alone). From it the GPU's power is **derived** through the
profile (``draw_at_frac_w``: the draw of a GPU running at that measured speed) and recorded with
``power_basis: derived`` — computed from a measured throughput, not a power measurement.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from testbed.errors import TestbedError
from testbed.power.caps import (
    POWER_DERIVED, CapEnforcer, CapReport, Enforcement, JobCap, PowerSetup, ThroughputPort,
)
from testbed.power.errors import PowerError
from testbed.power.backends import PowerBackend, register
from testbed.power.profile import PowerProfile

NAME = "emulated-throttle"
MIN_INTERVALS = 4     # step intervals a measured enforced fraction needs
SETTLE_WAIT_S = 1.0   # the most one trace step waits for them (all jobs together)
POLL_S = 0.05


@dataclass
class _Held:
    """One job's cap as last sent, and what was measured since it was sent."""

    site: str
    frac: float
    cap_w: float
    report: CapReport


class AgentThrottleCaps(CapEnforcer):
    name = NAME

    def __init__(self, port: ThroughputPort, profiles: dict[str, PowerProfile] | None = None):
        self._port = port
        self._profiles = profiles or {}
        self._held: dict[str, _Held] = {}
        self._applied: list[str] = []
        self.settle_wait_s = SETTLE_WAIT_S

    def apply(self, t_s: float, caps: dict[str, JobCap]) -> dict[str, CapReport]:
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
        """Ask each job's agent what it achieved since its cap was set (re-asserting the same
        fraction, which changes nothing). A cap in force for fewer than MIN_INTERVALS steps of a
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
                w = res.window or {}
                same = w.get("requested_frac") is not None and abs(w["requested_frac"] - h.frac) < 1e-9
                if same and w.get("training") and (w.get("window_intervals") or 0) < MIN_INTERVALS:
                    again.append(job_id)
                frac = w.get("enforced_frac") if same else None
                prof = self._profiles.get(h.site)
                power = prof.draw_at_frac_w(frac) if prof is not None and frac is not None else None
                out[job_id] = Enforcement(frac, power, POWER_DERIVED,
                                          w.get("measured_steps_per_s") if same else None,
                                          float(w.get("window_s") or 0.0) if same else 0.0)
            if not again or time.monotonic() >= deadline:
                break
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
            "emulation.nodes: agents, or backend: emulated",
    description="the node agent's closed-loop throttle slows real training to the profile's throughput at "
                "the cap; the enforced fraction is measured and the GPU power derived from it",
    emulation_rank=10,
))
