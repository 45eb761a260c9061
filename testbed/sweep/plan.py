"""Expand a sweep into cells (variant x grid point) and trials (cell x seed), and check every cell.

Every cell's scenario is built and validated (``scenario_from_dict``) before any trial runs, so a
bad path or value fails up front, naming the sweep file, the cell and the scenario field; so do
``metrics:`` names the base scenario's study cannot write (``metrics[i]``: renamed or unknown).
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from testbed.errors import SpecError
from testbed.analysis.names import param_column
from testbed.spec.files import resolve_topology
from testbed.spec.load import LoadedScenario, read_yaml, scenario_from_dict
from testbed.spec.topology import read_topology
from testbed.spec.trim import trim_to_run, warn_trimmed
from testbed.sweep.metrics import metric_problems
from testbed.spec.overrides import OverrideError, set_path, substitute
from testbed.sweep.spec import SweepFile, canonical

_SLUG_BAD = re.compile(r"[^A-Za-z0-9._=+-]+")


@dataclass(frozen=True)
class Cell:
    index: int
    id: str
    variant: str | None
    params: dict[str, Any]      # result column -> value (``variant``, grid paths, ``$name`` parameters)
    overrides: dict[str, Any]   # path -> value actually set in the scenario
    loaded: LoadedScenario      # the overridden scenario, validated


class CellError(Exception):
    """Problems of one cell: with its overrides (same in every cell) and with its scenario."""

    def __init__(self, cell: str, override: list[tuple[str, str]], scenario: list[tuple[str, str]]):
        super().__init__(cell)
        self.cell, self.override, self.scenario = cell, override, scenario


def _cell_problems(sweep: SweepFile, errors: list[CellError], n_cells: int) -> list[tuple[str, str]]:
    """One line per distinct problem, naming the cells it occurs in (or 'every cell')."""
    out: list[tuple[str, str]] = []
    cells_of: dict[tuple[str, str], list[str]] = {}
    for err in errors:
        out += [(sweep.problem(w), m) for w, m in err.override if (sweep.problem(w), m) not in out]
        for problem in err.scenario:
            cells_of.setdefault(problem, []).append(err.cell)
    for (where, msg), cells in cells_of.items():
        which = "every cell" if len(cells) == n_cells > 1 else ("cell " if len(cells) == 1 else "cells ") + ", ".join(cells)
        out.append((sweep.problem(f"{which}: {where}"), msg))
    return out


@dataclass(frozen=True)
class Trial:
    cell: Cell
    seed: int
    key: str                    # hash of (scenario, seed, substrate): a done trial with this key is reused

    @property
    def rel_dir(self) -> str:
        return f"trials/{self.cell.id}/seed-{self.seed}"


@dataclass(frozen=True)
class SweepPlan:
    sweep: SweepFile
    substrate: str              # sim | netns | mininet: ``auto`` is resolved once, for the base scenario
    substrate_why: str
    base: LoadedScenario
    param_columns: tuple[str, ...]  # the swept parameters' paths (``variant``, grid paths, ``$name``)
    cells: tuple[Cell, ...]
    trials: tuple[Trial, ...]

    @property
    def columns(self) -> dict[str, str]:
        """Each swept parameter's path -> its column in the sweep's tables (an identifier)."""
        return {p: param_column(p) for p in self.param_columns}


def _short(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return hashlib.sha256(canonical(value).encode()).hexdigest()[:6]
    return str(value)


def _label(column: str) -> str:
    """``policies[x].alpha`` -> ``alpha``; ``$deg`` -> ``deg``; ``a, b.c`` -> ``a``."""
    first = column.split(",")[0].strip().lstrip("$")
    return re.sub(r"\[[^\]]*\]", "", first.split(".")[-1])


def cell_id(index: int, variant: str | None, values: list[tuple[str, Any]]) -> str:
    """``007-filter-off_alpha=0.1_steady_degradation_pct=35``: readable, path-safe, unique by index."""
    parts = ([variant] if variant else []) + [f"{_label(k)}={_short(v)}" for k, v in values]
    slug = _SLUG_BAD.sub("-", "_".join(parts))[:80].strip("-_")
    return f"{index:03d}-{slug}" if slug else f"{index:03d}"


def inline_topology(data: dict, base_dir: Path) -> dict:
    """Inline a referenced topology file so that overrides can reach ``sites`` and ``links``."""
    name = data.get("topology")
    path = resolve_topology(name, base_dir) if isinstance(name, str) else None
    if path is None:
        return data
    topo = read_topology(path)
    merged = {k: v for k, v in data.items() if k != "topology"}
    merged["sites"] = [s.model_dump(mode="json", exclude_defaults=True) for s in topo.sites]
    merged["links"] = [link.model_dump(mode="json", exclude_defaults=True) for link in topo.links]
    return merged


def _scenario_text(data: dict, sweep: SweepFile, cell: str, overrides: dict[str, Any]) -> str:
    head = (f"# sweep {sweep.name} ({sweep.path.name}), cell {cell}\n"
            f"# base scenario: {sweep.scenario_path}\n"
            f"# overrides: {canonical(overrides)}\n")
    return head + yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def _build_cell(sweep: SweepFile, base_data: dict, index: int, variant, point: tuple,
                notes: dict[str, list[str]] | None = None, valid: Any = None) -> Cell:
    """One cell: apply the variant's and the grid point's overrides, drop what begins after a
    shortened run (its note added to ``notes``, per cell), validate the scenario. A key the base
    scenario does not have (``grid[feasibility.alpah]``) is named by the grid axis or variant that
    sets it, with the nearest valid paths of ``valid`` (the base scenario), once for every cell."""
    params: dict[str, Any] = {}
    if variant is not None:
        params["variant"] = variant.name
    overrides: dict[str, Any] = {}
    origin: dict[str, str] = {}
    named: list[tuple[str, Any]] = []
    free = {ax.param: value for ax, value in zip(sweep.axes, point) if ax.param}
    for ax, value in zip(sweep.axes, point):
        named.append((ax.key, value))
        for p, v in (ax.assignments(value) or {f"${ax.param}": value}).items():
            params[p] = v
        overrides.update(ax.assignments(value))
        origin.update({p: f"grid[{ax.key}]" for p in ax.paths})
    if variant is not None:
        overrides.update({p: substitute(v, free) for p, v in variant.set_.items()})
        k = sweep.spec.variants.index(variant)
        origin.update({p: f"variants[{k}].set[{p}]" for p in variant.set_})
    cid = cell_id(index, variant.name if variant else None, named)
    data = copy.deepcopy(base_data)
    if any(p.split(".")[0].split("[")[0] in ("sites", "links") for p in overrides):
        data = inline_topology(data, sweep.scenario_path.parent)
    problems: list[tuple[str, str]] = []
    for p, v in overrides.items():
        try:
            set_path(data, p, v)
        except OverrideError as e:
            problems.append((origin[p], str(e)))  # the same in every cell: no cell id
    data, note = trim_to_run(data)  # the cell's saved scenario is the one that runs
    if note is not None and notes is not None:
        notes.setdefault(note, []).append(cid)
    try:
        sc = scenario_from_dict(data, sweep.scenario_path.parent)
    except SpecError as e:
        raise CellError(cid, problems + _unknown_keys(e.problems, data, overrides, origin, valid),
                        [pm for pm in e.problems if not _is_unknown_key(pm, data, overrides)]) from e
    if problems:
        raise CellError(cid, problems, [])
    text = _scenario_text(data, sweep, cid, overrides)
    loaded = LoadedScenario(scenario=sc, path=sweep.scenario_path, text=text,
                            sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(), topology_path=None)
    return Cell(index=index, id=cid, variant=variant.name if variant else None, params=params,
                overrides=overrides, loaded=loaded)


def _unknown_key(problem: tuple[str, str], data: dict, overrides: dict[str, Any], valid: Any):
    """``(path as typed, message)`` when ``problem`` is an unknown key an override's path made
    (at its path, or a key above it the path created), else None. Unknown keys inside an override's
    value stay the cell's problem (the value may differ between cells)."""
    from testbed.spec.override_errors import attribute, resolve

    where, message = problem
    if not message.startswith("unknown field"):
        return None
    mine = attribute(where, message, {resolve(data, p): p for p in overrides}, valid)
    return (mine[0], mine[2]) if mine is not None and not mine[1] else None


def _is_unknown_key(problem: tuple[str, str], data: dict, overrides: dict[str, Any]) -> bool:
    return _unknown_key(problem, data, overrides, None) is not None


def _unknown_keys(problems: list[tuple[str, str]], data: dict, overrides: dict[str, Any], origin: dict[str, str],
                  valid: Any) -> list[tuple[str, str]]:
    """The unknown keys among ``problems`` named by the grid axis or variant (``origin``) that set them."""
    out = []
    for problem in problems:
        mine = _unknown_key(problem, data, overrides, valid)
        if mine is not None:  # a zipped axis names the path that is wrong too
            where = origin[mine[0]]
            out.append((where, mine[1] if where.endswith(f"[{mine[0]}]") else f"{mine[0]}: {mine[1]}"))
    return out


def _check_distinct(sweep: SweepFile, cells: list[Cell]) -> None:
    first: dict[str, str] = {}
    problems = []
    for c in cells:
        text = canonical(c.loaded.scenario.model_dump(mode="json"))
        if text in first:
            problems.append((sweep.problem(f"cell {c.id}"), f"the same scenario as cell {first[text]} "
                                                            "(a parameter changes nothing here)"))
        first.setdefault(text, c.id)
    if problems:
        raise SpecError(problems)


def _trial_key(cell: Cell, seed: int, substrate: str) -> str:
    body = canonical({"scenario": cell.loaded.scenario.model_dump(mode="json"), "seed": seed, "substrate": substrate})
    return hashlib.sha256(body.encode("utf-8")).hexdigest()[:16]


def _metric_problems(sweep: SweepFile, scenario) -> list[tuple[str, str]]:
    """``metrics:`` names the base scenario's study cannot write (renamed, misspelt), before any trial runs."""
    from testbed.studies import summary_metrics_for

    known = summary_metrics_for(scenario)
    if not sweep.spec.metrics or known is None:  # a study that does not declare its columns: checked after the trials
        return []
    return metric_problems(sweep.spec.metrics, dict.fromkeys(known, True), sweep.where or str(sweep.path))


def _check_columns(sweep: SweepFile, paths: list[str]) -> None:
    """Two swept parameters whose columns would be one (``a.b_c`` and ``a_b.c``) are refused."""
    seen: dict[str, str] = {}
    for p in paths:
        other = seen.setdefault(param_column(p), p)
        if other != p:
            raise SpecError([(sweep.problem(f"grid[{p}]"), f"its column {param_column(p)} is also {other!r}'s: "
                              "rename one (e.g. a $variable)")])


def plan_sweep(sweep: SweepFile, substrate: str | None = None) -> SweepPlan:
    """Every cell and trial of a sweep; all problems of all cells and of the metric names in one
    SpecError (one line each)."""
    from testbed.substrate.registry import choose_substrate
    from testbed.spec.load import load_scenario

    try:
        base = load_scenario(sweep.scenario_path)
    except SpecError as e:
        raise SpecError([(sweep.problem(f"scenario {sweep.spec.scenario}: {w}"), m) for w, m in e.problems]) from e
    bad_metrics = _metric_problems(sweep, base.scenario)
    base_data = read_yaml(sweep.scenario_path, "scenario file")
    variants = list(sweep.spec.variants) or [None]
    points = list(itertools.product(*(ax.values for ax in sweep.axes)))
    cells: list[Cell] = []
    errors: list[CellError] = []
    combos = [(v, p) for v, p in itertools.product(variants, points) if v is None or v.applies(sweep.axes, p)]
    notes: dict[str, list[str]] = {}
    for index, (variant, point) in enumerate(combos):
        try:
            cells.append(_build_cell(sweep, base_data, index, variant, point, notes, valid=base.scenario))
        except CellError as e:
            errors.append(e)
    if errors or bad_metrics:
        raise SpecError(bad_metrics + _cell_problems(sweep, errors, len(combos)))
    for note, ids in notes.items():  # one line per distinct drop, naming its cells
        which = "every cell" if len(ids) == len(combos) > 1 else ("cell " if len(ids) == 1 else "cells ") + ", ".join(ids)
        warn_trimmed(f"{sweep.where or sweep.path}: {which}: {note}")
    _check_distinct(sweep, cells)
    substrate, why = choose_substrate(substrate or sweep.spec.substrate, base.scenario)
    seeds = sweep.seeds(base.scenario.seed)
    trials = tuple(Trial(cell=c, seed=s, key=_trial_key(c, s, substrate)) for c in cells for s in seeds)
    columns = list(dict.fromkeys(k for c in cells for k in c.params))
    _check_columns(sweep, columns)
    return SweepPlan(sweep=sweep, substrate=substrate, substrate_why=why, base=base, param_columns=tuple(columns),
                     cells=tuple(cells), trials=trials)
