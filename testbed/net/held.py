"""A held network (``testbed net up``, :func:`testbed.net.up`): planned from a file, built, made
changeable live, and optionally replaying the scenario's bandwidth traces."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from testbed.netem.plan import FabricPlan


@dataclass
class HeldPlan:
    plan: FabricPlan
    changes: list = field(default_factory=list)  # RateChange of the replay (empty: no replay)
    replay: bool = False
    time_scale: float = 1.0
    duration_s: float = 0.0
    scaling: object = None  # testbed.netem.scaling.Scaling of a replayed scenario


def tcp_congestion_of(path: Path, given: str | None) -> str:
    """The sites' TCP congestion control: ``given`` (the --tcp-congestion flag), else the scenario's
    ``emulation.tcp_congestion``, else the default; checked against this kernel."""
    from testbed.netem import tcp_cc

    if given is not None:
        return tcp_cc.check(given, "--tcp-congestion")
    from testbed.spec.load import read_yaml

    doc = read_yaml(Path(path), "file") or {}
    emulation = doc.get("emulation") if isinstance(doc, dict) else None
    value = emulation.get("tcp_congestion", tcp_cc.DEFAULT) if isinstance(emulation, dict) else tcp_cc.DEFAULT
    if not isinstance(value, str):
        from testbed.errors import SpecError

        raise SpecError([("emulation.tcp_congestion", "must be a string")])
    return tcp_cc.check(value, "emulation.tcp_congestion")


def plan_held(path: Path, run_id: str, impairment: str, *, replay: bool, tcp_congestion: str | None = None) -> HeldPlan:
    """Without replay: the file's links at real (unscaled) rates. With replay: the scenario's WAN as an
    emulated run builds it (rates from the bandwidth traces at t = 0, at the run's scaling) and the
    change points of its traces. ``impairment`` is resolved (netem, relay or none)."""
    if not replay:
        from testbed.netem.links import file_links
        from testbed.netem.plan import plan_fabric

        sites, links = file_links(Path(path))
        cc = tcp_congestion_of(Path(path), tcp_congestion)
        plan = plan_fabric(run_id, sites, links, impairment, tcp_congestion=cc)
        return HeldPlan(_with_cross_traffic(plan, Path(path)))
    from testbed.api import load
    from testbed.errors import SpecError
    from testbed.inputs import build_inputs
    from testbed.net.livereplay import scenario_changes
    from testbed.spec.load import read_yaml
    from testbed.substrate.emulated.wan import plan_wan

    if "traces" not in (read_yaml(Path(path), "file") or {}):
        raise SpecError([("--replay", f"{path} is a topology file: replay needs a scenario (its bandwidth traces)")])
    inputs = build_inputs(load(path))
    scaling, plan = plan_wan(inputs, run_id, impairment=impairment, tcp_congestion=tcp_congestion)
    return HeldPlan(plan, scenario_changes(inputs, scaling), True, scaling.time_scale,
                    inputs.scenario.duration_s, scaling)


def _with_cross_traffic(plan: FabricPlan, path: Path) -> FabricPlan:
    """A scenario file's ``cross_traffic`` on the held network, at real (unscaled) rates and times."""
    from testbed.spec.load import read_yaml

    doc = read_yaml(path, "file") or {}
    if not (isinstance(doc, dict) and doc.get("cross_traffic") and "traces" in doc):
        return plan
    import dataclasses

    from testbed.api import load
    from testbed.netem.crosstraffic import plan_cross_traffic

    sc = load(path)
    return dataclasses.replace(plan, cross_traffic=plan_cross_traffic(sc.cross_traffic, seed=sc.seed))


def resolve(impairment: str) -> str:
    """``auto``: what the kernel has; ``netem`` refused where the kernel lacks it."""
    from testbed.errors import SpecError

    if impairment == "auto":
        from testbed.doctor.qdisc import detect_impairment

        return detect_impairment()
    if impairment == "netem":
        from testbed.doctor.qdisc import qdisc_available

        if not qdisc_available("netem"):
            raise SpecError([("--impairment", "netem: this kernel has no netem qdisc (sch_netem); use --impairment "
                                              "relay (or auto, which picks what the kernel has)")])
    return impairment


def make_live(fab, held: HeldPlan, *, detached: bool):
    """After ``fab.up()``: record what live changes need and start the replay (a process of its own
    when ``detached``, else a thread that is returned, started). None when there is no replay."""
    from testbed.netem.live import record_live
    from testbed.net.livereplay import replay_info, replayer, start_daemon

    info = replay_info(held.changes, held.time_scale, held.duration_s) if held.replay else None
    record_live(fab, {"replay": info} if info else None)
    if not held.replay:
        return None
    if detached:
        start_daemon(fab.plan.run_id, fab._tmp, held.changes, held.time_scale, info["t0_monotonic"])
        return None
    rp = replayer(fab.plan.run_id, held.changes, held.time_scale, info["t0_monotonic"])
    rp.start()
    return rp
