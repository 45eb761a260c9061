"""The Python API: load a scenario (with overrides), run it, read its results as DataFrames.

    import testbed
    sc = testbed.load("scenarios/quickstart.yaml", overrides={"duration_h": 12})
    res = testbed.run(sc, substrate="sim")            # results in a temporary directory
    res.summary                                       # one row per policy
    res.migrations.groupby("policy").size()

Every scenario that runs is validated the way ``testbed validate`` checks a file: overrides are
applied to the file's data by the sweep's path engine (:mod:`testbed.sweep.override`) and the
result is validated as a whole; a :class:`~testbed.spec.Scenario` edited in Python (``model_copy``
skips pydantic's validation) is validated again before it runs. The command line (``testbed run``)
is a thin layer over :func:`run`.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import warnings
import weakref
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from testbed.errors import SpecError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from testbed.spec import LoadedScenario, Scenario

PathLike = str | os.PathLike

RESULTS_FORMAT = "testbed-results/1"


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
    from testbed.sweep.override import check_path

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
    not fit the data is a SpecError naming its path."""
    from testbed.sweep.override import OverrideError, check_path, set_path

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


def _validated(data: dict, base: Path, overrides: Mapping[str, Any], where: str) -> "Scenario":
    """``scenario_from_dict``; a problem at (or under) an overridden path is named by the override."""
    from testbed.spec import scenario_from_dict

    try:
        return scenario_from_dict(data, base)
    except SpecError as e:
        def blame(w: str, m: str) -> tuple[str, str]:
            if any(w == p or w.startswith((f"{p}.", f"{p}[")) for p in overrides):
                return f"{where} {w}", m
            return w, (f"{m} (with the {where} values applied)" if overrides else m)

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


def prepare(source: "PathLike | Scenario", overrides: Mapping[str, Any] | None = None,
            where: str = "overrides") -> Prepared:
    """The scenario :func:`run` would run: a file (with overrides applied to its data) or a Scenario
    object, validated as a whole. ``where`` names the overrides in errors (``--set`` on the CLI)."""
    from testbed.spec import LoadedScenario, Scenario, load_scenario

    overrides = dict(overrides or {})
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
        base = origin.path.parent if origin is not None else Path.cwd()
        _apply(data, overrides, where)
        sc = _validated(data, base, overrides, where)
        file_text = (came.original_text or origin.text) if came is not None else None
        file_sha = (came.original_sha256 or origin.sha256) if came is not None else None
        head = [f"scenario {sc.name}, {'edited' if origin is not None else 'built'} in Python"]
        if origin is not None:
            head.append(f"from: {origin.path} (sha256 {file_sha})")
        if overrides:
            head.append(f"overrides: {json.dumps(overrides, sort_keys=True, default=str)}")
        text = _text(data, head)
        path = origin.path if origin is not None else Path.cwd() / "(python)"
        loaded = LoadedScenario(scenario=sc, path=path, text=text, sha256=_sha(text),
                                topology_path=origin.topology_path if origin is not None else None)
        done = {**(came.overrides or {}), **overrides} if came is not None else overrides
        return Prepared(loaded, file_text, file_sha, done or None)
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(f"expected a scenario file path or a testbed Scenario, got {type(source).__name__}")
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
    sc = _validated(data, base.path.parent, overrides, where)
    from testbed.recorder.manifest import ORIGINAL_COPY

    text = _text(data, [f"scenario {path.name} as it ran, with overrides (the file itself: {ORIGINAL_COPY})",
                        f"overrides: {json.dumps(overrides, sort_keys=True, default=str)}"])
    topo = base.topology_path if isinstance(data.get("topology"), str) else None
    loaded = LoadedScenario(scenario=sc, path=base.path, text=text, sha256=_sha(text), topology_path=topo)
    return Prepared(loaded, base.text, base.sha256, overrides)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def load(path: "PathLike | Scenario", overrides: Mapping[str, Any] | None = None) -> "Scenario":
    """A validated :class:`~testbed.spec.Scenario` from a file, with ``overrides`` (``{dotted.path:
    value}``, the sweep's syntax: ``{"policies[feasibility_aware].alpha": 0.2}``) applied first.
    Given a Scenario instead of a path, returns a validated copy with the overrides: the supported
    way to edit one. Raises :class:`~testbed.errors.SpecError` naming every bad field."""
    prepared = prepare(path, overrides)
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
    from testbed.substrate import substrate_choices

    known = substrate_choices()
    if substrate not in known:
        from testbed.suggest import did_you_mean

        raise SpecError([(flag, f"unknown substrate {substrate!r}{did_you_mean(str(substrate), known)} "
                                f"(known: {', '.join(known)})")])
    return substrate


def run(scenario: "PathLike | Scenario", substrate: str = "sim", out: PathLike | None = None,
        overrides: Mapping[str, Any] | None = None, seed: int | None = None, *, force: bool = False,
        progress: bool = True, plots: bool = True, argv: list[str] | None = None) -> "Results":
    """Run every policy of a scenario (a file or a :func:`load`-ed Scenario) on ``substrate`` (sim,
    netns, mininet or auto) and return its :class:`Results`. ``out=None`` writes to a new temporary
    directory (kept; ``Results.path`` names it). ``seed`` replaces the scenario's seed."""
    check_substrate(substrate)
    seed = check_seed(seed)
    prepared = prepare(scenario, overrides)
    if out is None:
        out = Path(tempfile.mkdtemp(prefix=f"testbed-{prepared.loaded.scenario.name}-"))
    path = run_prepared(prepared, out=Path(out), substrate=substrate, seed=seed, force=force,
                        progress=progress, plots=plots, argv=argv)
    return Results(path)


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

TABLES_MIGRATION = ("migrations", "jobs", "timeseries", "decisions", "power")


class Results:
    """A results directory as DataFrames. Every per-policy table (``<label>/<name>.parquet``) is
    read for all policies at once, with ``label`` (the policy's entry: its directory) and ``policy``
    (the policy's name) columns; ``summary`` has one row per policy (its ``summary.json``).

    Migration study: ``migrations``, ``jobs``, ``timeseries``, ``decisions``, ``power``. Federated
    (PowerTrip) study: ``rounds``, ``sites``. ``tables`` lists what this run has; ``table(name)``
    reads any of them."""

    def __init__(self, path: PathLike):
        self.path = Path(path).resolve()
        man = self.path / "manifest.json"
        try:
            manifest = json.loads(man.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise SpecError([(str(path), "not a testbed results directory (no manifest.json)")]) from None
        except (OSError, ValueError) as e:
            raise SpecError([(str(man), f"cannot be read as JSON ({type(e).__name__})")]) from None
        if not isinstance(manifest, dict) or manifest.get("format") != RESULTS_FORMAT:
            raise SpecError([(str(man), f"not a testbed results manifest (format {RESULTS_FORMAT} expected)")])
        self.manifest: dict = manifest

    def __repr__(self) -> str:
        return f"Results({str(self.path)!r}: {len(self.labels)} policies, tables {', '.join(self.tables)})"

    @cached_property
    def labels(self) -> list[str]:
        """The policy entries that ran, in run order (then any best-of entry such as ``static_k``)."""
        found = sorted(p.name for p in self.path.iterdir() if p.is_dir() and (p / "summary.json").is_file())
        order: list[str] = []
        for spec in self.manifest.get("policies", []):  # the scenario's order; a static_k list's runs after it
            label = spec.get("label") or spec.get("name") if isinstance(spec, dict) else None
            order += [d for d in found if d not in order and (d == label or d.startswith(f"{label}-"))]
        return order + [d for d in found if d not in order]

    def _summary_of(self, label: str) -> dict:
        from testbed.analysis.names import current

        return current(json.loads((self.path / label / "summary.json").read_text(encoding="utf-8")))

    @cached_property
    def _summaries(self) -> dict[str, dict]:
        return {lb: self._summary_of(lb) for lb in self.labels}

    @cached_property
    def summary(self) -> "pd.DataFrame":
        """One row per policy entry: its ``summary.json``."""
        import pandas as pd

        rows = [{"policy": s.get("policy", lb), "label": lb, **s} for lb, s in self._summaries.items()]
        return pd.DataFrame.from_records(rows)

    @cached_property
    def comparison(self) -> dict:
        return json.loads((self.path / "comparison.json").read_text(encoding="utf-8"))

    @cached_property
    def scenario_text(self) -> str:
        """``scenario.yaml``: the scenario as it ran."""
        return (self.path / "scenario.yaml").read_text(encoding="utf-8")

    @cached_property
    def traces(self) -> "pd.DataFrame":
        import pandas as pd

        return pd.read_parquet(self.path / "traces.parquet")

    @cached_property
    def tables(self) -> list[str]:
        names = {p.stem for lb in self.labels for p in (self.path / lb).glob("*.parquet")}
        return sorted(names)

    def table(self, name: str) -> "pd.DataFrame":
        """``<label>/<name>.parquet`` of every policy entry, concatenated, with ``label`` and ``policy``."""
        cache = self.__dict__.setdefault("_tables", {})
        if name not in cache:
            cache[name] = self._read_table(name)
        return cache[name]

    def _read_table(self, name: str) -> "pd.DataFrame":
        import pandas as pd

        from testbed.analysis.names import current_columns, typed_as_today

        if name not in self.tables:
            from testbed.suggest import did_you_mean

            raise KeyError(f"{self.path}: no {name!r} table{did_you_mean(name, self.tables)} "
                           f"(this run has: {', '.join(self.tables) or 'none'})")
        frames = []
        for lb in self.labels:
            f = self.path / lb / f"{name}.parquet"
            if not f.is_file():
                continue
            df = typed_as_today(name, current_columns(name, pd.read_parquet(f)))  # older results read as today's
            if "label" not in df.columns:
                df["label"] = lb
            if "policy" not in df.columns:
                df["policy"] = self._summaries[lb].get("policy", lb)
            frames.append(df[["policy", "label", *(c for c in df.columns if c not in ("policy", "label"))]])
        nonempty = [f for f in frames if len(f)]
        if not nonempty:
            return frames[0].iloc[0:0].reset_index(drop=True)
        with warnings.catch_warnings():  # all-NA columns of one policy's table (e.g. no migration measured)
            warnings.simplefilter("ignore", FutureWarning)
            return pd.concat(nonempty, ignore_index=True)

    @property
    def migrations(self) -> "pd.DataFrame":
        return self.table("migrations")

    @property
    def jobs(self) -> "pd.DataFrame":
        return self.table("jobs")

    @property
    def timeseries(self) -> "pd.DataFrame":
        return self.table("timeseries")

    @property
    def decisions(self) -> "pd.DataFrame":
        return self.table("decisions")

    @property
    def power(self) -> "pd.DataFrame":
        return self.table("power")

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self.table(name)
        except KeyError as e:
            raise AttributeError(str(e.args[0])) from None


def open_results(path: PathLike) -> Results:
    """The :class:`Results` of an existing results directory (``testbed run``'s ``--out``)."""
    return Results(path)


def sweep(path: PathLike, out: PathLike | None = None, *, parallel: int | None = None, ray: str | None = None,
          substrate: str | None = None, force: bool = False) -> "pd.DataFrame":
    """Run a sweep file (see :func:`testbed.sweep.api.sweep`); returns its statistics table."""
    from testbed.sweep.api import sweep as _sweep

    return _sweep(path, out, parallel=parallel, ray=ray, substrate=substrate, force=force)
