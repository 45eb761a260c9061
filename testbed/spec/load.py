"""Read a scenario file, merge its topology file, validate, resolve file paths.

Everything that can be wrong with a scenario is found here, at load time, and reported as
``SpecError`` with one ``(field path or file, message)`` per problem.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from testbed.errors import SpecError
from testbed.spec.errors_format import problems_from
from testbed.spec.dates import date_problems
from testbed.spec.files import (NOT_FOUND, builtin_topologies, input_file_problem, resolve_file, resolve_topology,
                                 with_trace_file)
from testbed.spec.kinds import wrong_kind
from testbed.spec.limits import size_problems
from testbed.spec.federated_checks import federated_problems
from testbed.spec.grid_signals import GRID_SIGNAL_UNION, signal_checks
from testbed.spec.policies import POLICY_UNION
from testbed.spec.scenario import Scenario
from testbed.spec.topology import read_topology
from testbed.spec.trace_sources import RENEWABLE_UNION
from testbed.spec.trim import trim_to_run, warn_trimmed
from testbed.safe_yaml import YamlProblem, parse_yaml


def _tags() -> frozenset[str]:
    """Discriminator values pydantic puts in error paths (left out of the field path shown): every
    registered policy name and trace kind, read when the error is reported."""
    return POLICY_UNION.tags() | RENEWABLE_UNION.tags() | GRID_SIGNAL_UNION.tags()


@dataclass(frozen=True)
class LoadedScenario:
    scenario: Scenario
    path: Path
    text: str
    sha256: str
    topology_path: Path | None


MAX_YAML_BYTES = 16 * 1024 * 1024
"""Largest scenario, topology or sweep file read (a 50,000-job list is about 5 MB)."""


def read_yaml(path: Path, what: str = "file") -> Any:
    """Parse one YAML file into Python data; every failure is a SpecError naming the file.

    Refused: non-regular files, files over MAX_YAML_BYTES, text that is not UTF-8, duplicate
    keys, deep nesting and alias bombs (``testbed/safe_yaml.py``). No message quotes the
    file's text."""
    if not path.exists() and not path.is_symlink():
        raise SpecError([(str(path), f"{what} not found")])
    why = input_file_problem(path, MAX_YAML_BYTES)
    if why is not None:
        why = why.replace("file not found", "not found")
        raise SpecError([(str(path), f"{what} {why}")])
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise SpecError([(str(path), f"cannot read {what}: {e.strerror or type(e).__name__}")]) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise SpecError([(f"{path}:{line}", f"{what} is not UTF-8 text (byte {e.start + 1})")]) from None
    if not text.strip():
        raise SpecError([(str(path), f"{what} is empty")])
    try:
        data = parse_yaml(text)
    except YamlProblem as e:
        where = f"{path}:{e.line}" if e.line is not None else str(path)
        raise SpecError([(where, e.message)]) from None
    if data is None:
        raise SpecError([(str(path), f"{what} is empty (only comments or whitespace)")])
    if not isinstance(data, dict):
        raise SpecError([(str(path), f"{what} must be a YAML mapping (key: value), got {type(data).__name__}")])
    return data


def _merge_topology(data: dict, base_dir: Path) -> tuple[dict, Path | None]:
    topo_name = data.get("topology")
    if topo_name is None:
        return data, None
    if not isinstance(topo_name, str):
        raise SpecError([("topology", "must be a file path or a shipped topology's name")])
    if data.get("sites") or data.get("links"):
        raise SpecError([("topology", "give either a topology file or inline sites/links, not both")])
    path = resolve_topology(topo_name, base_dir)
    if path is None:
        from testbed.suggest import did_you_mean

        shipped = builtin_topologies()
        raise SpecError([("topology", f"file not found: {topo_name}{did_you_mean(topo_name, shipped)} (relative to "
                                      "the scenario file; or a shipped topology by name: "
                                      f"{', '.join(shipped) or 'none in this install'})")])
    topo = read_topology(path)  # values are not quoted: the topology file may not be the user's own
    merged = dict(data)
    merged["sites"] = [s.model_dump() for s in topo.sites]
    merged["links"] = [link.model_dump() for link in topo.links]
    return merged, path


def _cross_checks(sc: Scenario, base_dir: Path) -> tuple[list[tuple[str, str]], dict[str, Any]]:
    """References between sections (sites, links, node types, files). Returns problems and file fixes."""
    problems: list[tuple[str, str]] = size_problems(sc)
    if problems:  # too big to check further (some checks below grow with the size)
        return problems, {}
    names = [s.name for s in sc.sites]
    site_set = set(names)
    if not sc.sites:
        problems.append(("sites", "at least one site is required (inline or via topology)"))
    first_index: dict[str, int] = {}
    for i, n in enumerate(names):
        if first_index.setdefault(n, i) != i:
            problems.append((f"sites[{i}].name", f"duplicate site {n!r}"))
    node_types = sc.all_node_types()
    for i, s in enumerate(sc.sites):
        if s.node_type not in node_types:
            problems.append((f"sites[{i}].node_type", f"unknown node type {s.node_type!r} (known: {sorted(node_types)})"))
    resolved_types: dict[str, Any] = {}
    problems += _profile_checks(sc, base_dir, resolved_types)
    seen_pairs: set[frozenset[str]] = set()
    for i, link in enumerate(sc.links):
        for end in ("a", "b"):
            if getattr(link, end) not in site_set:
                problems.append((f"links[{i}].{end}", f"unknown site {getattr(link, end)!r}"))
        pair = frozenset((link.a, link.b))
        if pair in seen_pairs:
            problems.append((f"links[{i}]", f"duplicate link {link.a}-{link.b}"))
        seen_pairs.add(pair)
    renewable = sc.traces.renewable
    for key in renewable:
        if key != "default" and key not in site_set:
            problems.append((f"traces.renewable.{key}", f"unknown site {key!r}"))
    if "default" not in renewable:
        for s in sc.sites:
            if s.name not in renewable:
                problems.append(("traces.renewable", f"no trace for site {s.name!r} and no 'default'"))
    link_keys = {f"{link.a}-{link.b}" for link in sc.links} | {f"{link.b}-{link.a}" for link in sc.links}
    for key in sc.traces.bandwidth.per_link:
        if key not in link_keys:
            problems.append((f"traces.bandwidth.per_link.{key}", f"unknown link {key!r}"))
    for i, ev in enumerate(sc.traces.bandwidth.events):
        if ev.link != "*" and ev.link not in link_keys:
            problems.append((f"traces.bandwidth.events[{i}].link", f"unknown link {ev.link!r}"))
        if ev.start_h >= sc.duration_h:
            problems.append((f"traces.bandwidth.events[{i}].start_h", f"starts after the run ends ({sc.duration_h} h)"))
    problems += _cross_traffic_problems(sc, site_set, base_dir, resolved_xt := [])
    jobs = sc.workloads.jobs if sc.workloads is not None else []
    problems += federated_problems(sc)
    for i, job in enumerate(jobs):
        if job.origin is not None and job.origin not in site_set:
            problems.append((f"workloads.jobs[{i}].origin", f"unknown site {job.origin!r}"))
        if job.arrival_h >= sc.duration_h:
            problems.append((f"workloads.jobs[{i}].arrival_h", f"arrives after the run ends ({sc.duration_h} h)"))
    ids = Counter(j.id for j in jobs if j.id is not None)
    for dup in sorted(x for x, n in ids.items() if n > 1):
        problems.append(("workloads.jobs", f"duplicate job id {dup!r}"))
    resolved: dict[str, Any] = {}
    if resolved_xt:
        resolved["__cross_traffic__"] = resolved_xt
    if resolved_types:
        resolved["__node_types__"] = resolved_types
    for key, src in renewable.items():
        fixed = with_trace_file(src, f"traces.renewable.{key}.file", base_dir, sc.limits.max_trace_bytes, problems)
        if fixed is not None and fixed is not src:
            resolved[key] = fixed
    return problems, resolved


def _cross_traffic_problems(sc: Scenario, site_set: set, base_dir: Path, resolved: list) -> list[tuple[str, str]]:
    """Each cross-traffic entry runs on a link's direction; its trace file (relative to the scenario)
    is found and well formed. ``resolved`` gets the entries with their trace paths made absolute."""
    problems: list[tuple[str, str]] = []
    if not sc.cross_traffic:
        return problems
    from testbed.spec.cross_traffic import LoadTraceError, read_load_trace  # no numpy: reading stays light
    from testbed.spec.files import trace_file

    links = {frozenset((lk.a, lk.b)): lk for lk in sc.links}
    changed = False
    out = []
    for i, e in enumerate(sc.cross_traffic):
        field = f"cross_traffic[{i}]"
        for end in ("src", "dst"):
            if getattr(e, end) not in site_set:
                problems.append((f"{field}.{end}", f"unknown site {getattr(e, end)!r}"))
        link = links.get(frozenset((e.src, e.dst)))
        if e.src in site_set and e.dst in site_set and link is None:
            problems.append((field, f"no link joins {e.src} and {e.dst} (cross-traffic runs on one link's direction)"))
        if link is not None and e.udp is not None and e.udp.rate_gbps > link.directed_bandwidth_gbps(e.src, e.dst):
            problems.append((f"{field}.udp.rate_gbps", (
                f"{e.udp.rate_gbps:g} Gbit/s is more than the link carries from {e.src} to {e.dst} "
                f"({link.directed_bandwidth_gbps(e.src, e.dst):g} Gbit/s): a UDP stream at the link's rate already "
                "fills it")))
        if e.trace is not None:
            path, why = trace_file(e.trace, base_dir, sc.limits.max_trace_bytes)
            if path is None and why == NOT_FOUND:
                from testbed.spec.cross_traffic import trace_not_found

                problems.append((f"{field}.trace", trace_not_found(e.trace, base_dir)))
            elif why is not None:
                problems.append((f"{field}.trace", f"{why}: {e.trace}"))
            else:
                try:
                    udp_most = max(read_load_trace(path).udp_gbps, default=0.0)
                except LoadTraceError as err:  # it names the file, never its content
                    problems.append((f"{field}.trace", str(err)))
                else:
                    if link is not None and udp_most > link.directed_bandwidth_gbps(e.src, e.dst):
                        problems.append((f"{field}.trace", (
                            f"its udp_gbps reaches {udp_most:g}, more than the link carries from {e.src} to {e.dst} "
                            f"({link.directed_bandwidth_gbps(e.src, e.dst):g} Gbit/s): {e.trace}")))
                if str(path) != e.trace:
                    e = e.model_copy(update={"trace": str(path)})
                    changed = True
        out.append(e)
    if changed and not problems:
        resolved.extend(out)
    return problems


def _profile_checks(sc: Scenario, base_dir: Path, resolved: dict[str, Any]) -> list[tuple[str, str]]:
    """Each node type's power profile must load and fit inside the node's active power."""
    from testbed.power.node_model import NodePower
    from testbed.power.gpu.profile import ProfileError, builtin_profiles, load_profile, profile_from_dict

    problems: list[tuple[str, str]] = []
    for name, nt in sc.all_node_types().items():
        if not nt.power_profile:
            continue
        field = f"node_types.{name}.power_profile"
        ref = nt.power_profile
        data = None
        if ref not in builtin_profiles():
            path = resolve_file(ref, base_dir)
            if path is None:
                problems.append((field, f"unknown power profile {ref!r}: not shipped ({', '.join(builtin_profiles())}) "
                                        "and no such file"))
                continue
            try:
                data = read_yaml(path, "power profile")
            except SpecError as e:
                problems += [(field, f"{w}: {m}") for w, m in e.problems]
                continue
            why = _profile_shape_problem(data)
            if why is not None:  # checked here: the profile parser's own messages quote values
                problems.append((field, f"{path}: {why}"))
                continue
            ref = str(path)
            resolved[name] = nt.model_copy(update={"power_profile": ref})
        try:
            prof = load_profile(ref) if data is None else profile_from_dict(data, ref)
        except ProfileError as e:
            problems.append((field, str(e)))
            continue
        if NodePower(nt, prof).host_kw < 0:
            problems.append((field, f"profile {prof.name!r} draws {prof.max_draw_w:g} W at its max cap, more than the "
                                    f"node's p_active_kw ({nt.p_active_kw:g} kW)"))
    return problems


def _number(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _profile_shape_problem(d: dict) -> str | None:
    """Types of a power-profile file's fields, without quoting any value (see testbed/power/gpu/profile.py)."""
    if not isinstance(d.get("name", ""), str):
        return "name: must be a string"
    for key in ("min_w", "max_w", "default_w", "idle_w"):
        if key in d and not _number(d[key]):
            return f"{key}: must be a finite number"
    points = d.get("points")
    if points is not None and (not isinstance(points, list) or len(points) > 10_000 or not all(
            isinstance(p, list) and len(p) == 3 and all(_number(x) for x in p) for p in points)):
        return "points: must be a list of [cap_w, throughput_frac, draw_w] number triples"
    return None


def load_scenario(path: str | Path) -> LoadedScenario:
    """A scenario file, validated; its relative paths resolve from its own folder. A sweep or
    topology file given instead is refused in one line that says which command takes it."""
    path = Path(path)
    data = read_yaml(path, "scenario file")
    why = wrong_kind(data, path, "scenario")
    if why is not None:
        raise SpecError([(str(path), why)])
    text = path.read_text(encoding="utf-8")
    base_dir = path.resolve().parent
    topo_name = data.get("topology")
    sc = scenario_from_dict(data, base_dir, trim=False)  # a file as written: what begins after its end is an error
    topo_path = resolve_topology(topo_name, base_dir) if isinstance(topo_name, str) else None
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return LoadedScenario(scenario=sc, path=path.resolve(), text=text, sha256=digest, topology_path=topo_path)


_POLICY_ENTRY = re.compile(r"^policies\[\d+\]$")
_UNKNOWN_NAME = re.compile(r"^unknown name '([^']*)'")


def _per_study(problems: list[tuple[str, str]], data: dict) -> list[tuple[str, str]]:
    """An unknown policy name is answered with the names of the scenario's own study (migration
    policies, or the PowerTrip study's selection policies for a ``federated:`` scenario)."""
    from testbed.spec.federated import SELECTION_POLICIES
    from testbed.spec.policies import MIGRATION_POLICIES
    from testbed.suggest import did_you_mean

    federated = isinstance(data, dict) and data.get("federated") is not None
    study, names = (("federated (PowerTrip) study", SELECTION_POLICIES.names()) if federated
                    else ("migration study", MIGRATION_POLICIES.names()))
    out = []
    for where, msg in problems:
        m = _UNKNOWN_NAME.match(msg)
        if m and _POLICY_ENTRY.match(where):
            msg = f"unknown policy {m.group(1)!r}{did_you_mean(m.group(1), names)} (the {study} has: {', '.join(names)})"
        out.append((where, msg))
    return out


def scenario_from_dict(data: dict, base_dir: Path | None = None, *, trim: bool = True) -> Scenario:
    """Validate an in-memory scenario (used by the loader, overrides, tests and sweeps). ``trim``:
    bandwidth events and listed jobs that begin at or after the end of the run (a ``duration_h``
    overridden shorter) are dropped, with one :class:`~testbed.errors.TestbedWarning`
    (:mod:`testbed.spec.trim`; ``data`` itself is not changed); without it (a file as written,
    :func:`load_scenario`) each is an error naming it."""
    base_dir = base_dir or Path.cwd()
    if trim:
        data, note = trim_to_run(data)
        warn_trimmed(note, stacklevel=2)
    from testbed.spec.scenario_plugins import import_plugins  # what the scenario's plugins register, first

    data = import_plugins(data, base_dir)
    data, _ = _merge_topology(data, base_dir)
    from testbed.spec.plugins import resolve_class_entries  # policies named by class join the union first

    data = resolve_class_entries(data, base_dir)
    from testbed.spec.programs import resolve_program_dirs  # a program's cwd: the scenario's folder by default

    data = resolve_program_dirs(data, base_dir)
    from testbed.spec.images import image_problems, resolve_image_paths  # container images: relative to the scenario

    data = resolve_image_paths(data, base_dir)
    try:
        sc = Scenario.model_validate(data)
    except ValidationError as e:
        raise SpecError(_per_study(problems_from(e, _tags(), model=Scenario), data)) from e
    problems, resolved = _cross_checks(sc, base_dir)
    problems += date_problems(sc)  # every instant the run implies: representable (pandas' range)
    signal_problems, signal_traces = signal_checks(sc, base_dir)  # carbon, price, batteries
    problems += signal_problems
    from testbed.spec.programs import program_problems  # user programs need node agents

    problems += program_problems(sc)
    problems += image_problems(sc)
    from testbed.spec.io_model_file import io_model_file  # the sim's migration I/O truth: relative to the scenario

    io_path, io_problems = io_model_file(sc.substrate.io_model, base_dir, sc.substrate.t_downtime_s)
    problems += io_problems
    profile_path = None
    if sc.federated is not None and sc.federated.compute.samples_per_s == "profile" and not problems:
        from testbed.spec.compute_profile import check_scenario, training_sites  # read at load time

        profile_path, profile_problems = check_scenario(sc, base_dir, training_sites(sc))
        problems += profile_problems
    if problems:
        raise SpecError(problems)
    if profile_path is not None:
        compute = sc.federated.compute.model_copy(update={"profile": profile_path})
        sc = sc.model_copy(update={"federated": sc.federated.model_copy(update={"compute": compute})})
    if io_path is not None:
        sc = sc.model_copy(update={"substrate": sc.substrate.model_copy(update={"io_model": io_path})})
    if signal_traces is not None:
        sc = sc.model_copy(update={"traces": signal_traces})
    cross = resolved.pop("__cross_traffic__", None)
    if cross:
        sc = sc.model_copy(update={"cross_traffic": cross})
    node_types = resolved.pop("__node_types__", None)
    if node_types:
        sc = sc.model_copy(update={"node_types": {**sc.node_types, **node_types}})
    if resolved:
        renewable = {**sc.traces.renewable, **resolved}
        sc = sc.model_copy(update={"traces": sc.traces.model_copy(update={"renewable": renewable})})
    return sc
