"""Cross-traffic on a live fabric: the plan (wall-clock units) and the generator processes.

:func:`plan_cross_traffic` turns a scenario's ``cross_traffic`` entries into
:class:`XtPlan` values (rates x byte_scale x time_scale, sizes x byte_scale, arrival rates x
time_scale; on/off phases drawn as the sim draws them) that travel in the
:class:`~testbed.netem.plan.FabricPlan`. The :class:`~testbed.netem.fabric.Fabric` starts them with
the rest of the fabric and stops them before its namespaces go: one sink per receiving site and one
sender per entry (:mod:`testbed.netem.xtgen`), each entering its site's namespace itself, each
recorded in the run's state file as it starts (``testbed clean`` ends them by PID, only while their
command line names the run's temp folder) and owned by the fabric's context manager.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

XT_PORT = 47301
"""The port the cross-traffic sinks listen on (TCP and UDP) in every receiving site's namespace."""


@dataclass(frozen=True)
class XtPlan:
    """One cross-traffic entry on a live fabric: ``spec`` is the sender's JSON (wall-clock units)
    without the destination address (the fabric adds it)."""

    index: int
    src: str
    dst: str
    spec: str  # JSON
    summary: str  # what it generates, in words (scenario units)


GENERATOR_MODULE = "testbed.netem.xtgen"
"""The module every generator process runs (``python -m``): its command line names it."""


def _words(e) -> str:
    parts = []
    if e.tcp:
        parts.append(f"{e.tcp.flows} TCP flow(s)" + (f" ({e.tcp.congestion})" if e.tcp.congestion else ""))
    if e.udp:
        parts.append(f"UDP {e.udp.rate_gbps:g} Gbit/s")
    if e.on_off:
        parts.append(f"{e.on_off.flows} on/off flow(s) {e.on_off.on_s:g}/{e.on_off.off_s:g} s")
    if e.poisson:
        p = e.poisson
        parts.append(f"Poisson {p.arrivals_per_s:g}/s of Pareto({p.pareto_shape:g}) mean {p.mean_size_mb:g} MB")
    if e.trace:
        parts.append(f"trace {Path(e.trace).name}")
    return ", ".join(parts)


def check_congestion(entries: Iterable) -> None:
    """Refuse, before any fabric is made, an entry whose ``tcp.congestion`` this machine cannot give
    its generator's sockets (:func:`testbed.netem.tcp_cc.problem`, the check of the sites' congestion
    control): :class:`~testbed.errors.SpecError` naming every such ``cross_traffic[i].tcp.congestion``.
    The entry's congestion control also drives its on/off, Poisson and trace flows."""
    from testbed.errors import SpecError
    from testbed.netem import tcp_cc

    bad = [(f"cross_traffic[{i}].tcp.congestion", why) for i, e in enumerate(entries)
           if e.tcp and e.tcp.congestion and (why := tcp_cc.problem(e.tcp.congestion))]
    if bad:
        raise SpecError(bad)


def plan_cross_traffic(entries: Iterable, *, time_scale: float = 1.0, byte_scale: float = 1.0,
                       seed: int = 0) -> tuple[XtPlan, ...]:
    """The live plan of a scenario's cross-traffic entries under a run's scaling; every entry's
    congestion control checked against this machine first (:func:`check_congestion`)."""
    from testbed.netem import tcp_cc
    from testbed.spec.cross_traffic import on_off_phases, read_load_trace

    entries = list(entries)
    check_congestion(entries)
    rate = 1e9 * byte_scale * time_scale  # bit/s on the wire per scenario Gbit/s
    out = []
    for i, e in enumerate(entries):
        spec: dict = {"seed": seed * 1000 + i, "time_scale": time_scale}
        if e.tcp:
            spec["tcp_flows"] = e.tcp.flows
            # ``host``: the machine's default (the sites' namespaces may default to another one)
            spec["congestion"] = tcp_cc.effective(e.tcp.congestion) if e.tcp.congestion else None
        if e.udp:
            spec["udp_bps"] = e.udp.rate_gbps * rate
        if e.on_off:
            o = e.on_off
            phases = on_off_phases(o.flows, o.on_s + o.off_s, seed, (e.src, e.dst, i))
            spec["on_off"] = {"on_s": o.on_s, "off_s": o.off_s, "phases_s": [float(x) for x in phases]}
        if e.poisson:
            p = e.poisson
            spec["poisson"] = {"rate_per_wall_s": p.arrivals_per_s * time_scale,
                               "mean_bytes": p.mean_size_mb * 1e6 * byte_scale, "shape": p.pareto_shape,
                               "max_flows": p.max_flows}
        if e.trace:
            tr = read_load_trace(e.trace)
            spec["trace"] = {"times_s": list(tr.times_s), "flows": list(tr.flows),
                             "udp_bps": [u * rate for u in tr.udp_gbps]}
        out.append(XtPlan(i, e.src, e.dst, json.dumps(spec), _words(e)))
    return tuple(out)


UNDERDELIVERED_FRAC = 0.25
"""Long-lived TCP cross-traffic that carried less than this share of what its flows should get
(:func:`long_lived_share_mbit`) did not load the link as the scenario says: the run warns."""


def long_lived_share_mbit(xts: Iterable[XtPlan], wire_mbit: dict[tuple[str, str], float]) -> dict[int, float]:
    """Per entry with long-lived TCP flows (``tcp.flows``, open for the whole run): the wire Mbit/s
    those flows should carry at least, beside one transfer, at its direction's lowest rate during the
    run (``wire_mbit``, per (src, dst)): ``flows / (the direction's long-lived flows + 1) x (rate - its
    UDP - its Poisson load)``. On/off, Poisson and trace flows only add to what an entry carries."""
    xts = list(xts)
    specs = {x.index: json.loads(x.spec) for x in xts}
    flows: dict[tuple[str, str], int] = {}
    other_bps: dict[tuple[str, str], float] = {}
    for x in xts:
        sp, key = specs[x.index], (x.src, x.dst)
        flows[key] = flows.get(key, 0) + int(sp.get("tcp_flows", 0))
        poisson = sp.get("poisson") or {}
        other_bps[key] = (other_bps.get(key, 0.0) + float(sp.get("udp_bps", 0.0))
                          + poisson.get("rate_per_wall_s", 0.0) * poisson.get("mean_bytes", 0.0) * 8)
    out = {}
    for x in xts:
        n, key = int(specs[x.index].get("tcp_flows", 0)), (x.src, x.dst)
        if n and key in wire_mbit:
            left = max(0.0, wire_mbit[key] - other_bps[key] / 1e6)
            out[x.index] = n / (flows[key] + 1) * left
    return out


def flows_of(xt: XtPlan) -> int:
    """The most TCP flows an entry's sender may have open at once."""
    spec = json.loads(xt.spec)
    n = int(spec.get("tcp_flows", 0)) + len((spec.get("on_off") or {}).get("phases_s", []))
    if spec.get("poisson"):
        n += int(spec["poisson"]["max_flows"])
    if spec.get("trace"):
        n += max(spec["trace"]["flows"], default=0)
    return max(n, 1)


def sender_spec(xt: XtPlan, dst_addr: str, congestion: str | None, clock_file: str | None = None) -> str:
    """The sender's JSON: the plan's, with the sink's address, the sites' congestion control where
    the entry names none (``host``: the namespace's default, no option set) and the run's clock file
    (:func:`write_clock`)."""
    spec = json.loads(xt.spec)
    spec.update(dst=dst_addr, port=XT_PORT)
    if clock_file:
        spec["clock_file"] = clock_file
    if not spec.get("congestion") and congestion and congestion != "host":
        spec["congestion"] = congestion
    return json.dumps(spec, separators=(",", ":"))


def gen_argv(role: str, netns: str, stats: str, ready: str, *, spec: str | None = None,
             port: int = XT_PORT) -> list[str]:
    argv = [sys.executable, "-m", GENERATOR_MODULE, role, "--netns", netns, "--stats", stats,
            "--ready", ready]
    if role == "sink":
        argv += ["--port", str(port)]
    else:
        argv += ["--spec", spec or "{}"]
    return argv


def write_clock(path: str, t_s: float) -> None:
    """Tell the generators the run's scenario time now (atomically): their on/off and trace
    schedules follow the emulation's clock, idle skips included."""
    import time

    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump({"t_s": t_s, "mono": time.monotonic()}, f)
    os.replace(tmp, path)


def read_stats(path: str | os.PathLike) -> dict | None:
    """A generator's last counters (None: none written yet, or unreadable mid-replace)."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
