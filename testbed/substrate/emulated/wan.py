"""A run's shaped WAN, planned one way for every live fabric: the migration study's substrates
(netns, mininet) and the federated study's exchange.

``plan_wan`` checks that the links can be had as asked (latency where the scenario needs it,
every site reachable), chooses the scaling from the same directed links that are shaped
(:func:`testbed.netem.links.scaled_links`) and plans namespaces and addresses. The caller makes
the fabric from the plan (its own kind: ``Fabric``, ``MininetFabric``), owns it, and brings it up.
"""

from __future__ import annotations

from testbed.errors import SpecError
from testbed.inputs import Inputs
from testbed.netem import tcp_cc
from testbed.netem.links import scaled_links
from testbed.netem.plan import FabricPlan, plan_fabric, unreachable
from testbed.netem.scaling import CAPACITY_MBIT_DIRECT, CAPACITY_MBIT_RELAY, Scaling


def resolve_impairment(requested: str) -> str:
    """``auto``: what this kernel offers (netem, else the userspace relay); anything else as asked."""
    if requested != "auto":
        return requested
    from testbed.doctor.qdisc import detect_impairment

    return detect_impairment()


def default_capacity(impairment: str) -> tuple[float, str]:
    """What one link can carry accurately on this machine with that impairment, and where that number
    comes from: through the delay relay, what `testbed bench shaping` measured it to carry here."""
    if impairment == "relay":
        from testbed.netem.dataplane_capacity import relay_capacity

        cap = relay_capacity(CAPACITY_MBIT_RELAY)
        return cap.mbit, cap.source
    return CAPACITY_MBIT_DIRECT, f"default {CAPACITY_MBIT_DIRECT:g} Mbit/s"


def default_capacity_mbit(impairment: str) -> float:
    """What one link can carry accurately on this machine with that impairment."""
    return default_capacity(impairment)[0]


def plan_wan(inputs: Inputs, run_id: str, *, impairment: str, capacity_mbit: float | None = None,
             tcp_congestion: str | None = None) -> tuple[Scaling, FabricPlan]:
    """The scaling and fabric plan of the scenario's WAN. ``impairment`` is resolved
    (:func:`resolve_impairment`); ``capacity_mbit`` defaults to :func:`default_capacity_mbit`.
    :class:`SpecError` when the scenario needs latency and ``none`` was asked, or a site is unreachable."""
    sc = inputs.scenario
    wants_latency = any(link.latency_ms != 0 or link.jitter_ms > 0 or link.loss_pct > 0 for link in sc.links)
    if impairment == "none" and wants_latency and sc.emulation.require_latency:
        raise SpecError([("emulation.require_latency", "links ask for latency/jitter/loss but impairment "
                          "'none' was requested; allow the relay or netem, or set require_latency: false")])
    capacity, source = (capacity_mbit, "given") if capacity_mbit else default_capacity(impairment)
    scaling, links = scaled_links(inputs, capacity_mbit=capacity, impaired=impairment != "none",
                                  capacity_source=source)
    cc = (tcp_cc.check(tcp_congestion, "--tcp-congestion") if tcp_congestion is not None
          else tcp_cc.check(sc.emulation.tcp_congestion, "emulation.tcp_congestion"))
    plan = plan_fabric(run_id, [s.name for s in sc.sites], links, impairment,  # type: ignore[arg-type]
                       tcp_congestion=cc)
    if sc.cross_traffic:  # generated on the fabric while it is up, scaled like the links
        import dataclasses

        from testbed.netem.crosstraffic import plan_cross_traffic

        plan = dataclasses.replace(plan, cross_traffic=plan_cross_traffic(
            sc.cross_traffic, time_scale=scaling.time_scale, byte_scale=scaling.byte_scale, seed=inputs.seed))
    missing = unreachable(plan)
    if missing:
        raise SpecError([("links", f"site {missing[0][1]} is unreachable from {missing[0][0]}")])
    return scaling, plan
