"""``power.backend: model``: each cap is set on a modelled GPU (:mod:`testbed.power.gpu.modelled_gpu`),
one per site with the site's power profile and the scenario's clock, and is enforced exactly as
requested; the profile says how fast the job then runs. Nothing is measured. What ``auto``
(the default) chooses wherever no training agent runs.
"""

from __future__ import annotations

from testbed.power.caps import CapEnforcer, CapReport, JobCap
from testbed.power.gpu.modelled_gpu import ModelledGpu
from testbed.power.node_model import NodePower
from testbed.power.gpu.profile import PowerProfile
from testbed.power.backends import ANY_NODES, PowerBackend, register

NAME = "model"


class ModelCaps(CapEnforcer):
    name = NAME

    def __init__(self, profiles: dict[str, PowerProfile]):
        """``profiles``: the GPU power profile of each site's nodes."""
        self._now_s = 0.0
        self.devices = {site: ModelledGpu(p, index=i, clock=self._clock) for i, (site, p) in enumerate(profiles.items())}

    @classmethod
    def for_scenario(cls, scenario) -> "ModelCaps":
        return cls({s.name: NodePower.of(scenario.node_type_of(s.name), s.name).profile for s in scenario.sites})

    def _clock(self) -> float:
        return self._now_s

    def apply(self, t_s: float, caps: dict[str, JobCap]) -> dict[str, CapReport]:
        self._now_s = max(self._now_s, t_s)
        out = {}
        for job, cap in caps.items():
            dev = self.devices[cap.site]
            dev.set_limit_w(cap.cap_w)  # PowerLimitOutOfRange outside the profile's range: never clamped silently
            # a modelled GPU enforces exactly the request: report the requested value itself
            out[job] = CapReport(cap.cap_w, dev.throughput_frac(), NAME)
        return out


register(PowerBackend(
    NAME, lambda setup: ModelCaps.for_scenario(setup.scenario), frozenset({ANY_NODES}),
    refusal="", description="the power profile's model: caps enforced as requested, nothing measured",
    emulation_rank=0,
))
