"""What the capabilities add up to (:func:`summarize`), as a table for people or a JSON object.

JSON schema (``SCHEMA_VERSION`` 1; fields are only ever added)::

    {"schema_version": 1,
     "capabilities": [{"name", "available", "detail", "consequence", "measured"}, ...],
     "summary": {"root", "kernel", "run_id",
                 "substrates": {"sim"|"netns"|"mininet"|"docker": {"usable": bool, "why": str}},
                 "bandwidth_shaping": "tbf"|"htb"|null, "latency": "netem"|"relay"|null,
                 "cpu_throttle": "cgroup_v1"|"cgroup_v2"|null, "gpus": int,
                 "netem_guest": bool, "missing": [name, ...], "not_probed": [name, ...]}}
"""

from __future__ import annotations

import os
from typing import Any

from testbed.doctor.capability import Capability

SCHEMA_VERSION = 1
SUBSTRATES = ("sim", "netns", "mininet", "docker")


def _first(caps: dict[str, Capability], *options: tuple[str, str]) -> str | None:
    """The label of the first (capability, label) option that is available."""
    return next((label for name, label in options if name in caps and caps[name].available), None)


def _why_not(caps: dict[str, Capability], needs: list[str]) -> str:
    """Empty if every need is available; else which are missing and which were not probed."""
    missing = [n for n in needs if n in caps and caps[n].probed and not caps[n].available]
    unknown = [n for n in needs if n not in caps or not caps[n].probed]
    parts = [f"missing {', '.join(missing)}" if missing else "", f"not probed: {', '.join(unknown)}" if unknown else ""]
    return "; ".join(p for p in parts if p)


def _substrate(caps: dict[str, Capability], needs: list[str], ok_why: str) -> dict[str, Any]:
    why = _why_not(caps, needs)
    return {"usable": not why, "why": why or ok_why}


def summarize(caps: dict[str, Capability], run_id: str = "") -> dict[str, Any]:
    ok = lambda name: name in caps and caps[name].available  # noqa: E731
    shaping = _first(caps, ("qdisc_tbf", "tbf"), ("qdisc_htb", "htb"))
    latency = _first(caps, ("qdisc_netem", "netem"), ("af_packet", "relay"))
    switch = _first(caps, ("brctl", "linux_bridge"), ("ovs", "ovs"))
    net = ["root", "netns", "veth"] + ([] if shaping else ["qdisc_tbf"])
    docker_how = "running engine" if ok("docker_engine") else "dockerd started by hand" if ok("dockerd") else ""
    shape_text = f"bandwidth: {shaping}; latency/jitter/loss: {latency or 'none'}"
    substrates = {
        "sim": {"usable": True, "why": "analytic, no privileges"},
        "netns": _substrate(caps, net, shape_text),
        "mininet": _substrate(caps, net + ["mininet", "mnexec"] + ([] if switch else ["linux_bridge", "brctl"])
                              + ([] if ok("qdisc_htb") else ["qdisc_htb"]),
                              f"switch: {switch}; bandwidth: htb (TCLink); latency/jitter/loss: {latency or 'none'}"),
        "docker": _substrate(caps, net + ([] if docker_how else ["docker_engine"]), f"nodes in containers ({docker_how})"),
    }
    nvml = caps.get("nvml")
    return {
        "root": ok("root"),
        "kernel": os.uname().release,
        "run_id": run_id,
        "substrates": substrates,
        "bandwidth_shaping": shaping,
        "latency": latency,
        "cpu_throttle": _first(caps, ("cgroup_v1_cpu", "cgroup_v1"), ("cgroup_v2_cpu", "cgroup_v2")),
        "gpus": int(nvml.measured.get("device_count", 0)) if nvml else 0,
        "netem_guest": ok("qemu"),
        "missing": [c.name for c in caps.values() if c.probed and not c.available],
        "not_probed": [c.name for c in caps.values() if not c.probed],
    }


def to_json(caps: dict[str, Capability], summary: dict[str, Any]) -> dict[str, Any]:
    return {"schema_version": SCHEMA_VERSION, "capabilities": [c.to_dict() for c in caps.values()],
            "summary": summary}


def _status(cap: Capability) -> str:
    return "yes" if cap.available else "no" if cap.probed else "?"


def render(caps: dict[str, Capability], summary: dict[str, Any]) -> str:
    """The table (capability, yes/no/?, detail), then "What this means", then the substrates."""
    width = max([len("capability"), *(len(n) for n in caps)])
    lines = [f"testbed doctor: kernel {summary['kernel']}, {'root' if summary['root'] else 'not root'}", "",
             f"{'capability':<{width}}  ok   detail"]
    lines += [f"{c.name:<{width}}  {_status(c):<3}  {c.detail}" for c in caps.values()]
    lines += ["", "What this means:"]
    lines += [f"  {c.name}: absent -> {c.consequence}" for c in caps.values() if c.probed and not c.available]
    if summary["not_probed"]:
        lines.append(f"  not probed ({'need_root_probes=False' if summary['root'] else 'needs root'}): "
                     f"{', '.join(summary['not_probed'])} -> run `testbed doctor` as root to know")
    if all(c.available for c in caps.values()):
        lines.append("  everything probed is available")
    lines += ["", "Substrates:"]
    for name in SUBSTRATES:
        s = summary["substrates"][name]
        lines.append(f"  {name:<8} {'yes' if s['usable'] else 'no':<3}  {s['why']}")
    lines += [f"  power caps: {'NVML, %d GPU(s)' % summary['gpus'] if summary['gpus'] else 'emulated'}"
              f" (CPU throttle: {summary['cpu_throttle'] or 'none'})"]
    return "\n".join(lines)
