"""SWEEP.yaml: a grid of scenario overrides crossed with named variants and seeds.

```yaml
name: alpha-vs-degradation            # optional; default: the file's stem
scenario: ../scenarios/quickstart.yaml  # relative to this file
substrate: sim                        # sim | netns | mininet | auto (any registered substrate)
seeds: 3                              # a count (0, 1, 2) or a list [1, 5, 9]; default: the scenario's seed
parallel: 2                           # default local workers (--parallel overrides)
grid:                                 # cartesian product over the axes, in this order
  traces.forecast.window.bias_pct: [0, 20]
  feasibility.alpha, policies[feasibility_aware].alpha: [0.05, 0.1, 0.2]  # zipped: set together
  $deg: [20, 50]                      # a free parameter: sets nothing itself; variants use "${deg}"
variants:                             # crossed with the grid; each sets several paths at once
  - {name: steady, set: {traces.bandwidth.steady_degradation_pct: "${deg}"}}
  - {name: events, set: {traces.bandwidth.events: [{link: "*", start_h: 6, duration_h: 6, degradation_pct: "${deg}"}]},
     when: {$deg: [50]}}              # optional: this variant only at these values of these axes
metrics: [grid_kwh, mean_jct_s]   # default: every numeric summary column
```

A zipped axis (paths joined by ``,``) takes either one value for all its paths or a list with one
value per path. Two cells that resolve to the same scenario are an error (a parameter that changes
nothing in some variant would otherwise repeat trials and count them twice). Problems are reported as ``SpecError`` lines naming the file and the field.
"""

from __future__ import annotations

import hashlib
from collections import Counter
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, field_validator

from testbed.errors import SpecError
from testbed.spec.errors_format import problems_from
from testbed.spec.load import read_yaml
from testbed.spec.base import Strict
from testbed.substrate.registry import SubstrateName
from testbed.spec.overrides import PARAM, check_path, references

_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


class Variant(Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$", description="Name of the variant (a column of the results).")
    set_: dict[str, Any] = Field(default_factory=dict, alias="set", description="path -> value")
    when: dict[str, list[Any]] = Field(
        default_factory=dict, description="grid axis (as written in grid) -> the values at which this variant "
        "runs; default: every grid point. E.g. degradation events only where the degradation is not 0, so "
        "the 0 % cell is run (and counted) once.")

    def applies(self, axes: "tuple[Axis, ...]", point: tuple) -> bool:
        """Whether this variant runs at the grid point (one value per axis, in the axes' order)."""
        at = {ax.key: canonical(v) for ax, v in zip(axes, point)}
        return all(at[key] in {canonical(v) for v in values} for key, values in self.when.items())


class SweepLimits(Strict):
    """Bounds on a sweep's size, checked before any cell is built (every cell is validated up front)."""

    max_cells: int = Field(1_000, ge=1, description="Grid points x variants.")
    max_trials: int = Field(10_000, ge=1, description="Cells x seeds.")


class SweepSpec(Strict):
    name: str | None = Field(None, pattern=_NAME, description="Name of the sweep (default: the file's stem); results go to results/sweep-<name>/ by default.")
    description: str = Field("", description="Free text about the sweep.")
    scenario: str = Field(min_length=1, description="Scenario file, relative to the sweep file.")
    substrate: SubstrateName = Field("sim", description="A registered substrate (testbed.substrate.registry) or auto.")
    seeds: int | list[int] | None = Field(None, description="A count N (seeds 0..N-1) or a list of seeds.")
    grid: dict[str, list[Any]] = Field(default_factory=dict, description="path (or 'path, path' or $name) -> values")
    variants: list[Variant] = Field(default_factory=list, description="Named variants, each a set of overrides crossed with the grid.")
    metrics: list[str] | None = Field(None, min_length=1, description="Summary columns the table reports (default: every numeric one).")
    parallel: int | None = Field(None, ge=1, le=1024, description="Trials at once on this machine (default: CPUs, 1 for emulation; at most CPUs for "
                                    "netns trials; --parallel overrides).")
    limits: SweepLimits = Field(default_factory=SweepLimits, description="Raise for a sweep that is big on purpose.")

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, v: int | list[int] | None) -> int | list[int] | None:
        if isinstance(v, int) and not 1 <= v <= 10_000:
            raise ValueError("a count of seeds must be in [1, 10000]")
        if isinstance(v, list):
            if not v:
                raise ValueError("must list at least one seed")
            if any(s < 0 for s in v):
                raise ValueError("seeds must be non-negative integers")
            if len(set(v)) != len(v):
                raise ValueError("seeds must be unique")
        return v


@dataclass(frozen=True)
class Axis:
    """One grid axis: the paths it sets (several when zipped, none for a $parameter) and its values."""

    key: str
    paths: tuple[str, ...]
    param: str | None
    values: tuple[Any, ...]

    def assignments(self, value: Any) -> dict[str, Any]:
        """path -> value for one value of this axis."""
        if self.param is not None:
            return {}
        if len(self.paths) > 1 and isinstance(value, list):
            return dict(zip(self.paths, value))
        return {p: value for p in self.paths}


@dataclass(frozen=True)
class SweepFile:
    spec: SweepSpec
    path: Path
    text: str
    sha256: str
    scenario_path: Path
    axes: tuple[Axis, ...]
    where: str = ""             # the file as the user named it, for error lines

    def problem(self, field: str) -> str:
        return f"{self.where or self.path}: {field}"

    @property
    def name(self) -> str:
        return self.spec.name or self.path.stem

    def seeds(self, scenario_seed: int) -> list[int]:
        s = self.spec.seeds
        if s is None:
            return [scenario_seed]
        return list(range(s)) if isinstance(s, int) else list(s)


def canonical(value: Any) -> str:
    """A stable text form of a value (for duplicates, keys and hashes)."""
    return json.dumps(value, sort_keys=True, default=str, separators=(",", ":"))


def _axis(key: str, values: list[Any], where: str) -> tuple[Axis | None, list[tuple[str, str]]]:
    problems: list[tuple[str, str]] = []
    m = PARAM.match(key.strip())
    if m:
        paths: tuple[str, ...] = ()
        param = m.group(1)
    else:
        param = None
        paths = tuple(p.strip() for p in key.split(","))
        for p in paths:
            why = check_path(p)
            if why:
                problems.append((where, why))
        if len(set(paths)) != len(paths):
            problems.append((where, "a zipped axis names the same path twice"))
    if not values:
        problems.append((where, "must list at least one value"))
    counts = Counter(canonical(v) for v in values)
    for dup in sorted(t for t, n in counts.items() if n > 1):
        problems.append((where, f"value {dup} is listed twice (it would repeat a cell)"))
    if len(paths) > 1:
        for i, v in enumerate(values):
            if isinstance(v, list) and len(v) != len(paths):
                problems.append((f"{where}[{i}]", f"a zipped axis of {len(paths)} paths takes one value or a list "
                                                  f"of {len(paths)} (got {len(v)})"))
    if problems:
        return None, problems
    return Axis(key=key, paths=paths, param=param, values=tuple(values)), []


def _cross_checks(spec: SweepSpec, axes: list[Axis]) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    owner: dict[str, str] = {}
    for ax in axes:
        for p in ax.paths:
            if p in owner:
                problems.append((f"grid[{ax.key}]", f"path {p!r} is already set by grid[{owner[p]}]"))
            owner.setdefault(p, ax.key)
    params = {ax.param for ax in axes if ax.param}
    used: set[str] = set()
    names = [v.name for v in spec.variants]
    for i, var in enumerate(spec.variants):
        if names.index(var.name) != i:
            problems.append((f"variants[{i}].name", f"duplicate variant {var.name!r}"))
        for path, value in var.set_.items():
            where = f"variants[{i}].set[{path}]"
            why = check_path(path)
            if why:
                problems.append((where, why))
            if path in owner:
                problems.append((where, f"path {path!r} is also a grid axis (grid[{owner[path]}])"))
            refs = references(value)
            used |= refs
            for r in sorted(refs - params):
                problems.append((where, f"uses ${{{r}}} but the grid has no ${r} axis"))
    keys = {ax.key: ax for ax in axes}
    for i, var in enumerate(spec.variants):
        for key, values in var.when.items():
            where = f"variants[{i}].when[{key}]"
            if key not in keys:
                problems.append((where, f"not a grid axis (axes: {', '.join(keys) or 'none'})"))
                continue
            if not values:
                problems.append((where, "must list at least one value"))
            known = {canonical(v) for v in keys[key].values}
            for v in values:
                if canonical(v) not in known:
                    problems.append((where, f"{canonical(v)} is not a value of grid[{key}]"))
    for p in sorted(params - used):
        problems.append((f"grid[${p}]", f"parameter ${p} is not used by any variant (write \"${{{p}}}\" in a variant)"))
    for i, m in enumerate(spec.metrics or []):
        if not m.isidentifier():
            problems.append((f"metrics[{i}]", f"not a summary column name: {m!r}"))
    if spec.metrics and len(set(spec.metrics)) != len(spec.metrics):
        problems.append(("metrics", "lists a column twice"))
    return problems


def _size_problems(spec: SweepSpec) -> list[tuple[str, str]]:
    """Cells and trials, counted from the axis lengths before anything is expanded or compared."""
    lengths = [len(values) for values in spec.grid.values()]
    cells = max(1, len(spec.variants))
    for n in lengths:
        cells *= n
    n_seeds = 1 if spec.seeds is None else (spec.seeds if isinstance(spec.seeds, int) else len(spec.seeds))
    lim = spec.limits
    shape = " x ".join([str(n) for n in lengths] + ([f"{len(spec.variants)} variants"] if spec.variants else []))
    if cells > lim.max_cells:
        return [("grid", f"{shape or '1'} = {cells:,} cells, over the limit of {lim.max_cells:,}: use fewer values, "
                         "or raise limits.max_cells in the sweep file")]
    if cells * n_seeds > lim.max_trials:
        return [("seeds", f"{cells:,} cells x {n_seeds:,} seeds = {cells * n_seeds:,} trials, over the limit of "
                          f"{lim.max_trials:,}: use fewer seeds or cells, or raise limits.max_trials in the sweep file")]
    return []


def load_sweep_file(path: str | Path) -> SweepFile:
    """Parse and check SWEEP.yaml on its own (the scenario and the overrides are checked by plan_sweep)."""
    path = Path(path)
    data = read_yaml(path, "sweep file")
    text = path.read_text(encoding="utf-8")
    try:
        spec = SweepSpec.model_validate(data)
    except ValidationError as e:
        raise SpecError([(f"{path}: {p}", m) for p, m in problems_from(e, frozenset(), model=SweepSpec)]) from None
    problems: list[tuple[str, str]] = _size_problems(spec)
    if problems:
        raise SpecError([(f"{path}: {where}", msg) for where, msg in problems])
    axes: list[Axis] = []
    for key, values in spec.grid.items():
        axis, probs = _axis(key, values, f"grid[{key}]")
        problems += probs
        if axis is not None:
            axes.append(axis)
    if not problems:
        problems += _cross_checks(spec, axes)
    scenario_path = (path.resolve().parent / Path(spec.scenario).expanduser()).resolve()
    if not scenario_path.is_file():
        problems.append(("scenario", f"file not found: {spec.scenario} (relative to the sweep file)"))
    if problems:
        raise SpecError([(f"{path}: {where}", msg) for where, msg in problems])
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return SweepFile(spec=spec, path=path.resolve(), text=text, sha256=digest, scenario_path=scenario_path,
                     axes=tuple(axes), where=str(path))
