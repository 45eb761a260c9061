"""Which kind of file a YAML mapping is (scenario, sweep or topology), and the one line that says so
when a command is given a file of another kind (``testbed run sweep.yaml``, ``testbed validate
topologies/eu-5.yaml``), instead of every field the expected kind misses."""

from __future__ import annotations

from pathlib import Path

SCENARIO_KEYS = ("traces", "policies", "sites", "workloads", "federated", "topology")
"""Sections only a scenario has: a file with one of them is not a sweep."""

TOPOLOGY_KEYS = frozenset({"name", "description", "sites", "links"})
"""Every field a topology file may have (testbed.spec.topology.Topology)."""


def is_sweep(data: dict) -> bool:
    """A sweep file names a scenario file and carries none of a scenario's own sections."""
    return isinstance(data.get("scenario"), str) and not any(k in data for k in SCENARIO_KEYS)


def is_topology(data: dict) -> bool:
    """A topology file has sites (and links, a name, a description) and nothing else."""
    return "sites" in data and set(data) <= TOPOLOGY_KEYS


SCENARIO_ONLY = ("traces", "policies", "duration_h", "workloads", "federated", "topology")
"""Fields only a scenario has (a topology file has none of them, a sweep file names a scenario)."""


def file_kind(data: dict) -> str | None:
    """``sweep``, ``topology`` or ``scenario``; None when the keys do not tell (each reader then
    reports the fields it misses or does not know)."""
    if is_sweep(data):
        return "sweep"
    if is_topology(data):
        return "topology"
    if any(k in data for k in SCENARIO_ONLY):
        return "scenario"
    return None


def _how(kind: str, path: str) -> str:
    return {
        "sweep": f"run it with `testbed sweep {path}`",
        "topology": f"`testbed net up {path}` takes it, and a scenario names it in `topology:`",
        "scenario": f"run it with `testbed run {path}`",
    }[kind]


def wrong_kind(data: dict, path: str | Path, expected: str, accepted: tuple[str, ...] = ()) -> str | None:
    """None if ``data`` is an ``expected`` file (or one of ``accepted``), else the one-line message:
    ``this is a sweep, not a scenario file: run it with `testbed sweep PATH```."""
    kind = file_kind(data)
    if kind is None or kind == expected or kind in accepted:
        return None
    return f"this is a {kind}, not a {' or '.join((expected, *accepted))} file: {_how(kind, str(path))}"
