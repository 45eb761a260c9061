"""Helpers to build and check topology files: graph checks, a stable seeded choice, and an
aligned, byte-reproducible YAML writer (the format of ``topologies/eu-5.yaml``).

Pure functions on :class:`~testbed.spec.topology.Topology`; nothing live.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from typing import Sequence, TypeVar

from testbed.spec.topology import Link, Site, Topology

T = TypeVar("T")


def stable_choice(seed: int | str, key: str, options: Sequence[T]) -> T:
    """A choice from ``options`` that depends only on (seed, key): the same on every Python
    version and platform, and independent of the order in which keys are drawn."""
    digest = hashlib.sha256(f"{seed}/{key}".encode()).digest()
    return options[int.from_bytes(digest[:8], "big") % len(options)]


def graph_problems(topology: Topology) -> list[str]:
    """What a scenario's cross-checks would reject, plus connectivity: duplicate site names,
    links to unknown sites, duplicate site pairs, and sites no path reaches."""
    names = [s.name for s in topology.sites]
    problems = [f"duplicate site {n!r}" for n in sorted({n for n in names if names.count(n) > 1})]
    known, pairs = set(names), set()
    neighbours: dict[str, set[str]] = defaultdict(set)
    for i, link in enumerate(topology.links):
        for end in (link.a, link.b):
            if end not in known:
                problems.append(f"links[{i}]: unknown site {end!r}")
        pair = frozenset((link.a, link.b))
        if pair in pairs:
            problems.append(f"links[{i}]: duplicate link {link.a}-{link.b}")
        pairs.add(pair)
        neighbours[link.a].add(link.b)
        neighbours[link.b].add(link.a)
    seen, todo = {names[0]}, [names[0]]
    while todo:
        for nxt in neighbours[todo.pop()] - seen:
            seen.add(nxt)
            todo.append(nxt)
    problems += [f"site {n!r} is not connected to {names[0]!r}" for n in names if n not in seen]
    return problems


def _num(x: float) -> str:
    return f"{x:g}"


def _site_fields(s: Site) -> list[str]:
    fields = [f"name: {s.name},", f"lat_deg: {s.lat_deg:.2f},", f"lon_deg: {s.lon_deg:.2f},",
              f"node_type: {s.node_type},", f"nodes: {s.nodes}"]
    if s.grid_limit_kw is not None:
        fields[-1] += ","
        fields.append(f"grid_limit_kw: {_num(s.grid_limit_kw)}")
    return fields


def _link_fields(link: Link) -> list[str]:
    fields = [f"a: {link.a},", f"b: {link.b},", f"bandwidth_gbps: {_num(link.bandwidth_gbps)}"]
    optional = [("bandwidth_b_to_a_gbps", link.bandwidth_b_to_a_gbps), ("latency_ms", link.latency_ms),
                ("jitter_ms", link.jitter_ms or None), ("loss_pct", link.loss_pct or None)]
    for key, value in optional:
        if value is not None:
            fields[-1] += ","
            fields.append(f"{key}: {_num(value)}")
    return fields


def _aligned(rows: list[list[str]], comments: list[str]) -> list[str]:
    """Flow mappings with every field in its own column (rows may differ in length)."""
    widths = [max(len(r[i]) for r in rows if len(r) > i) for i in range(max(map(len, rows)))]
    out = []
    for row, comment in zip(rows, comments):
        cells = [cell.ljust(widths[i]) if i < len(row) - 1 else cell for i, cell in enumerate(row)]
        line = "  - {" + " ".join(cells) + "}"
        out.append(line)
    width = max(map(len, out))
    return [f"{line.ljust(width)}  # {c}" if c else line for line, c in zip(out, comments)]


def render_yaml(topology: Topology, header: Sequence[str], site_comments: dict[str, str] | None = None,
                link_comments: dict[str, str] | None = None) -> str:
    """The topology as YAML: ``header`` lines as comments, then name, description, sites, links."""
    site_comments, link_comments = site_comments or {}, link_comments or {}
    lines = [f"# {h}".rstrip() for h in header]
    lines += [f"name: {topology.name}", f"description: {topology.description}", "sites:"]
    lines += _aligned([_site_fields(s) for s in topology.sites], [site_comments.get(s.name, "") for s in topology.sites])
    if topology.links:
        lines.append("links:")
        lines += _aligned([_link_fields(k) for k in topology.links], [link_comments.get(k.key, "") for k in topology.links])
    return "\n".join(lines) + "\n"
