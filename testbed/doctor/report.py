"""What the capabilities add up to (:func:`summarize`), as a table for people or a JSON object.

JSON schema (``SCHEMA_VERSION`` 1; fields are only ever added)::

    {"schema_version": 1,
     "capabilities": [{"name", "available", "detail", "consequence", "measured"}, ...],
     "summary": {"root", "kernel", "run_id",
                 "substrates": {"sim"|"netns"|"mininet"|"docker"|...: {"usable": bool, "why": str}},
                 "bandwidth_shaping": "tbf"|"htb"|null, "latency": "netem"|"relay"|null,
                 "cpu_throttle": "cgroup_v1"|"cgroup_v2"|null, "gpus": int,
                 "netem_guest": bool, "missing": [name, ...], "not_probed": [name, ...]}}

``substrates`` has a line per registered substrate and node runtime whose entry has a ``doctor`` check
(``sim``, ``netns``, ``mininet``, then the ``docker`` runtime, then plug-ins):
:func:`testbed.substrate.registry.doctor_checks` collects them and ``testbed doctor`` passes them to
:func:`summarize` (this package sits below the substrates, so it is handed them rather than importing
them). A check is ``(capabilities) -> (the capabilities it needs, what it is when usable)``; the
helpers below (:func:`available`, :func:`network_needs`, ...) are for writing one.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from testbed.doctor.capability import Capability

SCHEMA_VERSION = 1

Check = Callable[[dict[str, Capability]], tuple[list[str], str]]
"""A substrate's or node runtime's usability: (capabilities) -> (the capabilities it needs, what it is
when they are all there)."""


def available(caps: dict[str, Capability], name: str) -> bool:
    return name in caps and caps[name].available


def first_available(caps: dict[str, Capability], *options: tuple[str, str]) -> str | None:
    """The label of the first (capability, label) option that is available."""
    return next((label for name, label in options if available(caps, name)), None)


def shaping(caps: dict[str, Capability]) -> str | None:
    """How link bandwidth is shaped here: ``tbf``, ``htb`` or None."""
    return first_available(caps, ("qdisc_tbf", "tbf"), ("qdisc_htb", "htb"))


def latency(caps: dict[str, Capability]) -> str | None:
    """How link latency, jitter and loss are emulated here: ``netem``, ``relay`` (the delay relay) or None."""
    return first_available(caps, ("qdisc_netem", "netem"), ("af_packet", "relay"))


def network_needs(caps: dict[str, Capability]) -> list[str]:
    """What a fabric of network namespaces needs: root, namespaces, veth pairs and a shaping qdisc."""
    return ["root", "netns", "veth"] + ([] if shaping(caps) else ["qdisc_tbf"])


def _why_not(caps: dict[str, Capability], needs: list[str]) -> str:
    """Empty if every need is available; else which are missing and which were not probed."""
    missing = [n for n in needs if n in caps and caps[n].probed and not caps[n].available]
    unknown = [n for n in needs if n not in caps or not caps[n].probed]
    parts = [f"missing {', '.join(missing)}" if missing else "", f"not probed: {', '.join(unknown)}" if unknown else ""]
    return "; ".join(p for p in parts if p)


def usable(caps: dict[str, Capability], check: Check) -> dict[str, Any]:
    """``{"usable", "why"}`` of one substrate or node runtime by its check."""
    needs, ok_why = check(caps)
    why = _why_not(caps, needs)
    return {"usable": not why, "why": why or ok_why}


def summarize(caps: dict[str, Capability], run_id: str = "", checks: Mapping[str, Check] | None = None) -> dict[str, Any]:
    """``checks``: the line name -> check of each substrate and node runtime doctor reports
    (:func:`testbed.substrate.registry.doctor_checks`), in order; none: no substrate lines."""
    nvml = caps.get("nvml")
    return {
        "root": available(caps, "root"),
        "kernel": os.uname().release,
        "run_id": run_id,
        "substrates": {name: usable(caps, check) for name, check in (checks or {}).items()},
        "bandwidth_shaping": shaping(caps),
        "latency": latency(caps),
        "cpu_throttle": first_available(caps, ("cgroup_v1_cpu", "cgroup_v1"), ("cgroup_v2_cpu", "cgroup_v2")),
        "gpus": int(nvml.measured.get("device_count", 0)) if nvml else 0,
        "netem_guest": available(caps, "qemu"),
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
    for name, s in summary["substrates"].items():
        lines.append(f"  {name:<8} {'yes' if s['usable'] else 'no':<3}  {s['why']}")
    lines += [f"  power caps: {'NVML, %d GPU(s)' % summary['gpus'] if summary['gpus'] else 'emulated'}"
              f" (CPU throttle: {summary['cpu_throttle'] or 'none'})"]
    return "\n".join(lines)
