"""``power.backend: emulated-throttle``: each running job's real training is slowed to the
profile's throughput fraction at its cap, by its node agent's CPU throttle
(:mod:`testbed.power.throttle`; the substrate's :class:`~testbed.power.caps.ThroughputPort`).
What ``emulated`` (the default) chooses where agents train (``emulation.nodes: agents``).
An unchanged cap is not sent again.
"""

from __future__ import annotations

from testbed.power.caps import CapEnforcer, CapReport, JobCap, PowerSetup, ThroughputPort
from testbed.power.errors import PowerError
from testbed.power.backends import PowerBackend, register

NAME = "emulated-throttle"


class AgentThrottleCaps(CapEnforcer):
    name = NAME

    def __init__(self, port: ThroughputPort):
        self._port = port
        self._sent: dict[str, tuple[str, float, CapReport]] = {}  # job -> (site, frac, its report)

    def apply(self, t_s: float, caps: dict[str, JobCap]) -> dict[str, CapReport]:
        out = {}
        for job_id, cap in caps.items():
            site = self._port.job_site(job_id, cap.site)
            frac = min(1.0, max(1e-6, cap.throughput_frac))
            prev = self._sent.get(job_id)
            if prev is not None and prev[0] == site and abs(prev[1] - frac) < 1e-9:
                out[job_id] = prev[2]
                continue
            res = self._port.set_throughput(job_id, site, frac, cap.cap_w)
            rep = CapReport(cap.cap_w, res.frac, NAME, res.throttle, None, res.reason)
            self._sent[job_id] = (site, frac, rep)
            out[job_id] = rep
        return out


def _make(setup: PowerSetup) -> AgentThrottleCaps:
    if setup.target.port is None:
        raise PowerError(f"power.backend {NAME}: this substrate has no training agents to throttle")
    return AgentThrottleCaps(setup.target.port)


register(PowerBackend(
    NAME, _make, frozenset({"agents"}),
    refusal=f"{NAME} slows real training, which runs only on agents: use --substrate netns with "
            "emulation.nodes: agents, or backend: emulated",
    description="the node agent's CPU throttle slows real training to the profile's throughput at the cap",
    emulation_rank=10,
))
