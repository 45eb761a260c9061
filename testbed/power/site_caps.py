"""``power.backend: nvml`` in a run: every site's cap goes to a real GPU through NVML.

One GPU stands for each site (GPU *i* for the *i*-th site of the scenario): the site's running
nodes share one cap (the budget is split evenly), so one device per site enforces it and its
readings are the site's measured power per node. Limits are restored when the run ends, on
Ctrl-C and on a crash (:class:`~testbed.power.gpu.nvml.NvmlNode`). A cap outside the GPU's own range
is clamped to it (the GPU's range, not the profile's, is what the driver accepts) and the clamp
is reported; a cap the driver did not enforce is reported too, never silently assumed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from testbed.power.caps import CapEnforcer, CapReport, JobCap, PowerSetup
from testbed.power.gpu.device import PowerNode
from testbed.power.errors import CapNotEnforced, PowerError
from testbed.power.backends import PowerBackend, register

NAME = "nvml"


class NvmlSiteCaps(CapEnforcer):
    name = NAME

    def __init__(self, sites: Sequence[str], *, node_factory: Callable[[Sequence[int] | None], PowerNode] | None = None):
        self.sites = list(sites)
        self._factory = node_factory
        self._node: PowerNode | None = None

    def __enter__(self) -> "NvmlSiteCaps":
        from testbed.power.gpu.nvml import NvmlNode, nvml_available

        factory = self._factory
        if factory is None:
            ok, why = nvml_available()
            if not ok:
                raise PowerError(f"power.backend: nvml: {why}")
            factory = NvmlNode
        node = factory(None)
        if len(node.devices) < len(self.sites):
            close = getattr(node, "close", None)
            if close:
                close()
            raise PowerError(f"power.backend: nvml needs one GPU per site ({len(self.sites)} sites, "
                             f"{len(node.devices)} GPU(s)); use power.backend auto or fewer sites")
        self._node = node.__enter__()  # records the limits to restore
        return self

    def __exit__(self, *exc) -> None:
        node, self._node = self._node, None
        if node is not None:
            node.__exit__(*exc)

    def close(self) -> None:
        self.__exit__(None, None, None)

    def apply(self, t_s: float, caps: dict[str, JobCap]) -> dict[str, CapReport]:
        if self._node is None:
            raise PowerError("NvmlSiteCaps used outside its `with` block")
        per_site: dict[str, tuple[float, str, float | None]] = {}
        for cap in caps.values():
            if cap.site in per_site:
                continue
            dev = self._node.devices[self.sites.index(cap.site)]
            lim = dev.limits_w()
            want = min(lim.max_w, max(lim.min_w, cap.cap_w))
            detail = "" if want == cap.cap_w else f"clamped to {dev.name}'s range [{lim.min_w:g}, {lim.max_w:g}] W"
            try:
                dev.set_limit_w(want)
            except CapNotEnforced as e:
                detail = f"{detail}; {e}".strip("; ")
            per_site[cap.site] = (dev.enforced_limit_w(), detail, dev.power_w())
        out = {}
        for job, cap in caps.items():
            enforced, detail, measured = per_site[cap.site]
            out[job] = CapReport(enforced, cap.throughput_frac if abs(enforced - cap.cap_w) < 1.0 else float("nan"),
                                 NAME, "", measured, detail)
        return out


def _make(setup: PowerSetup) -> NvmlSiteCaps:
    return NvmlSiteCaps(setup.sites)


register(PowerBackend(
    NAME, _make, frozenset({"agents"}),
    refusal="nvml caps real GPUs, which only matters when real training runs on them: "
            "use --substrate netns with emulation.nodes: agents, or backend: auto",
    description="real GPUs through NVML, one per site (limits restored when the run ends)",
))
