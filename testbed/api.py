"""The Python API: load a scenario (with overrides), run or sweep it, read its results as DataFrames.

    import testbed
    sc = testbed.load("scenarios/quickstart.yaml", overrides={"duration_h": 24})
    res = testbed.run(sc, substrate="sim")            # results in a temporary directory, removed with res
    res.summary                                       # one row per policy
    res.migrations.groupby("policy").size()
    table = testbed.sweep(sc, grid={"policies[feasibility_aware].alpha": [0.1, 0.2]}, seeds=range(3))
    testbed.open(table.attrs["path"]).summary         # every trial x policy, with run_id, cell, seed

A scenario is a file, a dict holding what a file would (relative paths resolve from ``base=``,
default the current directory) or a :class:`~testbed.spec.Scenario`.

Every scenario that runs is validated the way ``testbed validate`` checks a file: overrides are
applied to the file's data by the sweep's path engine (:mod:`testbed.spec.overrides`) and the
result is validated as a whole; a :class:`~testbed.spec.Scenario` edited in Python (``model_copy``
skips pydantic's validation) is validated again before it runs. The command line (``testbed run``)
is a thin layer over :func:`run`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import warnings
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from testbed.errors import SpecError
from testbed.recorder.reader import RESULTS_FORMAT, is_kind
from testbed.results import Results

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from testbed.spec import LoadedScenario, Scenario
    from testbed.sweep_results import SweepResults

PathLike = str | os.PathLike

__all__ = ["RESULTS_FORMAT", "Prepared", "Results", "check_seed", "check_substrate", "compare", "comparison_groups",
           "load", "open_results", "parse_set", "prepare", "run", "run_prepared", "sweep"]


@dataclass(frozen=True)
class Prepared:
    """What :func:`run` runs: the validated scenario, the text saved as ``scenario.yaml``, and the
    original file's text and sha256 when the scenario that runs differs from the file."""

    loaded: "LoadedScenario"
    original_text: str | None = None
    original_sha256: str | None = None
    overrides: dict[str, Any] | None = None


# ------------------------------------------------------------------------------ overrides

def parse_set(items: list[str] | tuple[str, ...], flag: str = "--set") -> dict[str, Any]:
    """``["duration_h=12", "policies[feasibility_aware].alpha=0.2"]`` -> ``{path: value}``; each
    value is read as YAML (``12`` a number, ``null``, ``[1, 2]``, ``{a: 1}``, else text)."""
    from testbed.safe_yaml import YamlProblem, parse_yaml
    from testbed.spec.overrides import check_path

    out: dict[str, Any] = {}
    for item in items:
        path, sep, text = item.partition("=")
        path = path.strip()
        if not sep or not path:
            raise SpecError([(flag, f"expected PATH=VALUE, e.g. duration_h=12 (got {item[:80]!r})")])
        why = check_path(path)
        if why is not None:
            raise SpecError([(f"{flag} {path[:80]}", why)])
        if not text.strip():
            raise SpecError([(f"{flag} {path}", "no value after '=' (write null for none)")])
        try:
            out[path] = parse_yaml(text)
        except YamlProblem as e:
            raise SpecError([(f"{flag} {path}", f"the value is not valid YAML: {e.message}")]) from None
    return out


def _apply(data: dict, overrides: Mapping[str, Any], where: str) -> dict:
    """Set every override in ``data`` (in place) with the sweep's path engine; an override that does
    not fit the data is a SpecError naming its path as typed."""
    from testbed.spec.overrides import OverrideError, check_path, set_path

    problems = []
    for path, value in overrides.items():
        if not isinstance(path, str):
            problems.append((f"{where} {path!r}", "an override path must be a string such as 'duration_h'"))
            continue
        why = check_path(path)
        if why is not None:
            problems.append((f"{where} {path}", why))
            continue
        try:
            set_path(data, path, value)
        except OverrideError as e:
            problems.append((f"{where} {path}", str(e)))
    if problems:
        raise SpecError(problems)
    return data


def _validated(data: dict, base: Path, overrides: Mapping[str, Any], where: str,
               valid: Any = None) -> "Scenario":
    """``scenario_from_dict``; a problem at (or under) an overridden path, or an unknown key an
    override made, is named by the override as typed. ``valid``: the (valid) Scenario before the
    overrides, whose paths are suggested for an unknown key."""
    from testbed.spec.override_errors import attribute, resolve
    from testbed.spec import scenario_from_dict

    try:
        return scenario_from_dict(data, base)
    except SpecError as e:
        resolved = {resolve(data, p): p for p in overrides if isinstance(p, str)}

        def blame(w: str, m: str) -> tuple[str, str]:
            mine = attribute(w, m, resolved, valid)
            if mine is None:
                return w, (f"{m} (with the {where} values applied)" if overrides else m)
            typed, below, message = mine
            return f"{where} {typed}{below}", message

        raise SpecError([blame(w, m) for w, m in e.problems]) from None


def _touches_topology(overrides: Mapping[str, Any]) -> bool:
    return any(str(p).split(".")[0].split("[")[0] in ("sites", "links") for p in overrides)


def _text(data: dict, head: list[str]) -> str:
    import yaml

    return "".join(f"# {line}\n" for line in head) + yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


# ------------------------------------------------------------------------------ load

_ORIGINS: dict[int, Prepared] = {}


def _remember(prepared: Prepared) -> None:
    """Which file (and overrides) a Scenario came from, so that ``run(load(path))`` records the file."""
    key = id(prepared.loaded.scenario)
    _ORIGINS[key] = prepared
    weakref.finalize(prepared.loaded.scenario, _ORIGINS.pop, key, None)


def _from_data(data: Mapping, base: Path) -> "Scenario":
    """A scenario given as data (a dict, as a scenario file would hold it), validated; relative
    paths in it resolve from ``base``. Errors name its fields."""
    import copy

    from testbed.spec import scenario_from_dict

    return scenario_from_dict(copy.deepcopy(dict(data)), base)


def prepare(source: "PathLike | Mapping | Scenario", overrides: Mapping[str, Any] | None = None,
            where: str = "overrides", base: PathLike | None = None) -> Prepared:
    """The scenario :func:`run` would run: a file (with overrides applied to its data), a dict (a
    scenario as data: relative paths resolve from ``base``, default the current directory) or a
    Scenario object, validated as a whole. ``where`` names the overrides in errors (``--set`` on
    the CLI)."""
    from testbed.spec import LoadedScenario, Scenario, load_scenario

    overrides = dict(overrides or {})
    if base is not None:
        base = Path(base).expanduser().resolve()
    if isinstance(source, Mapping):
        source = _from_data(source, base or Path.cwd())
    if isinstance(source, Scenario):
        came = _ORIGINS.get(id(source))
        if came is not None and came.loaded.scenario is not source:
            came = None
        if came is not None and not overrides and came.loaded.scenario == source:
            return came  # load()'s own result, unchanged
        origin = came.loaded if came is not None else None
        with warnings.catch_warnings():  # an edit that skipped validation (model_copy) is validated below
            warnings.simplefilter("ignore", UserWarning)
            data = source.model_dump(mode="json")
        data.pop("topology", None)  # the loader inlined its sites and links
        base = origin.path.parent if origin is not None else (base or Path.cwd())
        _apply(data, overrides, where)
        data = _trimmed(data)
        sc = _validated(data, base, overrides, where, valid=source)
        file_text = (came.original_text or origin.text) if came is not None else None
        file_sha = (came.original_sha256 or origin.sha256) if came is not None else None
        head = [f"scenario {sc.name}, {'edited' if origin is not None else 'built'} in Python"]
        if origin is not None:
            head.append(f"from: {origin.path} (sha256 {file_sha})")
        if overrides:
            head.append(f"overrides: {json.dumps(overrides, sort_keys=True, default=str)}")
        text = _text(data, head)
        path = origin.path if origin is not None else base / "(python)"
        loaded = LoadedScenario(scenario=sc, path=path, text=text, sha256=_sha(text),
                                topology_path=origin.topology_path if origin is not None else None)
        done = {**(came.overrides or {}), **overrides} if came is not None else overrides
        return Prepared(loaded, file_text, file_sha, done or None)
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(f"expected a scenario file path, a dict or a testbed Scenario, got {type(source).__name__}")
    path = Path(source)
    if not overrides:
        return Prepared(load_scenario(path))
    from testbed.spec.load import read_yaml

    base = load_scenario(path)  # the file itself must be valid first (its own errors, then the overrides')
    data = read_yaml(path, "scenario file")
    if _touches_topology(overrides):
        from testbed.sweep.plan import inline_topology

        data = inline_topology(data, base.path.parent)
    _apply(data, overrides, where)
    data = _trimmed(data)
    sc = _validated(data, base.path.parent, overrides, where, valid=base.scenario)
    from testbed.recorder.manifest import ORIGINAL_COPY

    text = _text(data, [f"scenario {path.name} as it ran, with overrides (the file itself: {ORIGINAL_COPY})",
                        f"overrides: {json.dumps(overrides, sort_keys=True, default=str)}"])
    topo = base.topology_path if isinstance(data.get("topology"), str) else None
    loaded = LoadedScenario(scenario=sc, path=base.path, text=text, sha256=_sha(text), topology_path=topo)
    return Prepared(loaded, base.text, base.sha256, overrides)


def _trimmed(data: dict) -> dict:
    """``data`` without what a shortened ``duration_h`` leaves outside the run (said in one warning),
    so that the scenario.yaml saved with the results is the one that ran and loads again."""
    from testbed.spec.trim import trim_to_run, warn_trimmed

    data, note = trim_to_run(data)
    warn_trimmed(note, stacklevel=4)
    return data


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def load(source: "PathLike | Mapping | Scenario", overrides: Mapping[str, Any] | None = None, *,
         base: PathLike | None = None) -> "Scenario":
    """A validated :class:`~testbed.spec.Scenario` from a file, or from a dict holding what a
    scenario file holds (its relative paths resolve from ``base``, default the current
    directory), with ``overrides`` (``{dotted.path: value}``, the sweep's syntax:
    ``{"policies[feasibility_aware].alpha": 0.2}``) applied first. Given a Scenario, returns a
    validated copy with the overrides: the supported way to edit one. Raises
    :class:`~testbed.errors.SpecError` naming every bad field."""
    prepared = prepare(source, overrides, base=base)
    _remember(prepared)
    return prepared.loaded.scenario


# ------------------------------------------------------------------------------ run

def check_seed(seed: Any, flag: str = "seed") -> int | None:
    if seed is None:
        return None
    try:
        value = int(seed) if not isinstance(seed, bool) and str(seed).strip().lstrip("+").isdigit() else None
    except ValueError:
        value = None
    if value is None or value >= 2**63:
        raise SpecError([(flag, f"must be a non-negative integer below 2**63 (got {str(seed)[:40]!r})")])
    return value


def check_substrate(substrate: str, flag: str = "substrate") -> str:
    from testbed.substrate import unknown_substrate

    problem = unknown_substrate(substrate)
    if problem is not None:
        raise SpecError([(flag, problem)])
    return substrate


def run(scenario: "PathLike | Mapping | Scenario", substrate: str = "sim", out: PathLike | None = None,
        overrides: Mapping[str, Any] | None = None, seed: int | None = None, *, force: bool = False,
        progress: bool = True, plots: bool = True, argv: list[str] | None = None,
        base: PathLike | None = None, figure_format: str | None = None,
        figure_style: str | None = None) -> "Results":
    """Run every policy of a scenario (a file, a dict as :func:`load` takes it, or a Scenario) on
    ``substrate`` (sim, netns, mininet or auto) and return its :class:`Results`. ``out=None``
    writes to a new temporary directory that the returned Results owns: it is removed when that
    object is garbage collected or Python exits (``Results.keep()`` keeps it). ``seed`` replaces
    the scenario's seed. ``figure_format`` (png, svg, pdf) and ``figure_style`` (a matplotlib style)
    are ``--figure-format`` and ``--figure-style`` of ``testbed run``."""
    check_substrate(substrate)
    seed = check_seed(seed)
    with _figures(figure_format, figure_style):  # checked before any work
        return _run(prepare(scenario, overrides, base=base), out, substrate=substrate, seed=seed, force=force,
                    progress=progress, plots=plots, argv=argv)


def _figures(figure_format: str | None, figure_style: str | None):
    """The figures' format and style given to :func:`run` or :func:`sweep`; neither given: whatever
    encloses the call (a ``figure_output`` block, the environment) applies."""
    import contextlib

    from testbed.analysis.figures import figure_output

    if figure_format is None and figure_style is None:
        return contextlib.nullcontext()
    return figure_output(figure_format, figure_style)


def _run(prepared: Prepared, out: PathLike | None, **run_kw: Any) -> "Results":
    """:func:`run_prepared` into ``out``, or into a temporary directory the returned Results owns."""
    if out is not None:
        return Results(run_prepared(prepared, out=Path(out), **run_kw))
    tmp = Path(tempfile.mkdtemp(prefix=f"testbed-{prepared.loaded.scenario.name}-"))
    try:
        return Results(run_prepared(prepared, out=tmp, **run_kw), temporary=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def run_prepared(prepared: Prepared, *, out: Path | None, substrate: str, seed: int | None, force: bool = False,
                 progress: bool = True, plots: bool = True, argv: list[str] | None = None) -> Path:
    """The run of an already prepared scenario (the CLI's path); returns the results directory."""
    loaded = prepared.loaded
    if out is not None:
        from testbed.recorder.out_dir import check_out_dir

        check_out_dir(out, kind="run", force=force, protect=(loaded.path,))
    from testbed.runner import run_scenario

    original = None
    if prepared.original_text is not None:
        original = {"text": prepared.original_text, "sha256": prepared.original_sha256,
                    "overrides": prepared.overrides or {}}
    return run_scenario(loaded, out_dir=out, substrate=substrate, seed=seed, progress=progress, force=force,
                        argv=argv, plots=plots, original=original)


# ------------------------------------------------------------------------------ results

def open_results(path: PathLike) -> "Results | SweepResults":
    """What a run or a sweep wrote (``testbed.open``): a run's results directory (``testbed run``'s
    ``--out``) as :class:`Results`, a sweep directory as :class:`~testbed.sweep_results.SweepResults`
    (every table over all its trials, with ``run_id``, ``cell``, ``seed``, ``policy`` and ``label``)."""
    from testbed.sweep_results import SweepResults

    if is_kind(Path(path), "sweep"):
        return SweepResults(path)
    return Results(path)


# ------------------------------------------------------------------------------ sweep

def sweep(source: "PathLike | Mapping | Scenario", out: PathLike | None = None, *,
          grid: Mapping[str, Any] | None = None, seeds: "int | Iterable[int] | None" = None,
          variants: list[Mapping[str, Any]] | None = None, metrics: list[str] | None = None,
          name: str | None = None, parallel: int | None = None, ray: str | None = None,
          substrate: str | None = None, force: bool = False, base: PathLike | None = None,
          figure_format: str | None = None, figure_style: str | None = None) -> "pd.DataFrame":
    """Run a sweep through the sweep engine (:mod:`testbed.sweep`) and return its statistics table
    (``table.csv``; ``attrs``: ``path``, ``results``, ``failed``). ``source`` is a sweep file, a
    sweep as a dict, or a scenario (a file, a dict or a Scenario) swept over ``grid`` (override
    path -> values, a sweep file's ``grid:``) and ``seeds`` (a count or the seeds, e.g.
    ``range(10)``); ``variants``, ``metrics`` and ``name`` are the sweep file's fields, and any of
    them given here replaces the sweep's own. Relative paths in a dict resolve from ``base``
    (default: the current directory). ``out=None``: a temporary directory, removed when Python exits.
    ``figure_format`` and ``figure_style``: those of the sweep's report (``testbed sweep``'s flags)."""
    from testbed.sweep_from_python import run_sweep

    if substrate is not None:
        check_substrate(substrate)
    fields = {"grid": grid, "seeds": seeds, "variants": variants, "metrics": metrics, "name": name}
    with _figures(figure_format, figure_style):  # checked before any trial
        return run_sweep(source, out, {k: v for k, v in fields.items() if v is not None}, prepare=prepare,
                         base=base, parallel=parallel, ray=ray, substrate=substrate, force=force)


# ------------------------------------------------------------------------------ compare

def comparison_groups(path: PathLike) -> list:
    """The sides a results directory gives :func:`compare`
    (:class:`~testbed.analysis.run_compare.Group`): a run's directory is one (its seed), a sweep's
    one per cell (its completed trials, by seed), a cell's folder of a sweep
    (``<sweep>/trials/<cell>``) one. A SpecError naming ``path`` when it is none of these."""
    from testbed.analysis.run_compare import Group
    from testbed.sweep_results import SweepResults

    shown, p = str(path), Path(path).expanduser()
    what = "not a results directory (no manifest.json of a run, no sweep.json of a sweep)"
    if not p.is_dir():
        raise SpecError([(shown, "no such directory" if not p.exists() else f"{what}: not a directory")])
    if is_kind(p, "sweep"):
        sw = SweepResults(p)
        done = sw.trials[sw.trials["status"] == "completed"]
        if not len(done):
            raise SpecError([(shown, "a sweep with no completed trial: nothing to compare")])
        cells: dict[str, list] = {}
        for run_id, cell in zip(done["run_id"], done["cell"]):
            cells.setdefault(cell, []).append(sw.runs[run_id])
        return [_group(f"{shown} [{cell}]" if len(cells) > 1 else shown, runs) for cell, runs in cells.items()]
    if (p / "manifest.json").is_file():
        return [_group(shown, [Results(p)])]
    seeds = sorted(d for d in p.glob("seed-*") if (d / "manifest.json").is_file())
    if seeds:  # one cell of a sweep
        return [_group(shown, [Results(d) for d in seeds])]
    raise SpecError([(shown, what)])


def _group(name: str, runs: list[Results]):
    from testbed.analysis.run_compare import Group

    group = Group(name=name, scenario={})
    for res in runs:
        seed = res.manifest.get("seed")
        scenario = (res.manifest.get("scenario") or {}).get("resolved")
        if scenario is None:  # older results: the scenario as it ran, unresolved
            import yaml

            scenario = yaml.safe_load(res.scenario_text) or {}
        if not group.scenario:
            group.scenario = scenario
        if seed in group.runs:
            raise SpecError([(str(res.path), f"seed {seed} twice in {name}: a side of a comparison is one "
                                             "scenario's runs, one per seed")])
        group.runs[seed] = res._summaries
    return group


def compare(*paths: PathLike, metrics: list[str] | None = None, policies: list[str] | None = None) -> "pd.DataFrame":
    """What differs between results (run or sweep directories; a sweep counts as one side per
    cell), against the first: per other side, policy and metric, the change with its 95 % CI,
    paired by seed where the seeds match (``ci``: paired, unpaired or none, and a ``note`` saying
    why). ``attrs["scenario_diff"]``: per other side, every scenario path that differs with both
    values (:mod:`testbed.analysis.run_compare`). ``metrics``/``policies``: only these."""
    from testbed.analysis.run_compare import compare_groups

    groups = [g for p in paths for g in comparison_groups(p)]
    if len(groups) < 2:
        raise SpecError([(str(paths[0]) if paths else "compare", "a comparison needs two results directories, "
                                                                 "or a sweep with two cells or more")])
    df = compare_groups(groups, metrics=metrics, policies=policies)
    _check_names(df, groups, metrics, policies)
    return df


def _check_names(df, groups, metrics, policies) -> None:
    """A metric or policy asked for that no side has: a SpecError with the nearest names."""
    from testbed.analysis.run_compare import numeric_metrics
    from testbed.suggest import did_you_mean

    problems = []
    known_metrics = numeric_metrics(groups)
    for m in metrics or []:
        if m not in known_metrics:
            problems.append(("metric", f"{m!r} is not a numeric summary field of every side"
                                       f"{did_you_mean(m, known_metrics)}"))
    labels = {lb for g in groups for lb in g.labels()}
    for lb in policies or []:
        if lb not in labels:
            problems.append(("policy", f"no policy entry {lb!r}{did_you_mean(lb, labels)} "
                                       f"(present: {', '.join(sorted(labels))})"))
    if problems:
        raise SpecError(problems)
