"""``testbed.sweep`` from Python: a sweep file, a sweep as a dict, or a scenario (a file, a dict or a
Scenario) with a ``grid`` and ``seeds``, run by the sweep engine (:mod:`testbed.sweep`: the same
checks, cells, trials and tables as ``testbed sweep FILE``).

The engine reads a sweep file and the scenario file it names. A sweep given as data (or a sweep
file with fields replaced from Python) is written to a temporary folder as ``sweep.yaml``, and so
is a scenario given as a dict or a Scenario (the validated scenario, whose file paths the loader
made absolute); the folder is removed when the sweep ends, and the sweep directory keeps its own
copy of ``sweep.yaml`` and each trial's ``scenario.yaml``. Errors name the sweep's fields
(``sweep: grid[...]``), never the temporary file.
"""

from __future__ import annotations

import atexit
import dataclasses
import os
import re
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any, Callable, Mapping

from testbed.errors import SpecError

WHERE = "sweep"
"""How errors name a sweep given from Python (a sweep file is named by its path)."""


def _plain(value: Any, where: str) -> Any:
    """``value`` as YAML-safe data: mappings, lists (tuples, ranges), text, numbers, booleans, None
    (numpy scalars become numbers, paths text); anything else is a SpecError naming ``where``."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, Mapping):
        return {str(k): _plain(v, f"{where}[{k}]" if where else str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple, range)):
        return [_plain(v, f"{where}[{i}]") for i, v in enumerate(value)]
    item = getattr(value, "item", None)  # a numpy scalar
    if callable(item) and getattr(value, "shape", None) == ():
        return _plain(item(), where)
    if hasattr(value, "tolist"):  # a numpy array
        return _plain(value.tolist(), where)
    raise SpecError([(f"{WHERE}: {where}", f"a value of type {type(value).__name__} is not plain data "
                                          "(numbers, text, booleans, lists and mappings)")])


def _scenario_file(source: Any, prepare: Callable, base: Path, folder: Path) -> tuple[Path, str]:
    """The scenario file the engine reads, and the scenario's name: a file as it is, else the
    validated scenario written to ``folder``."""
    import yaml

    prepared = prepare(source, base=base if isinstance(source, Mapping) else None)
    loaded = prepared.loaded
    if isinstance(source, (str, os.PathLike)):
        return Path(source).expanduser().resolve(), loaded.scenario.name
    if prepared.original_text is None and loaded.path.is_file():  # load(path) unchanged: the file itself
        from testbed.spec.load import load_scenario

        if load_scenario(loaded.path).sha256 == loaded.sha256:
            return loaded.path, loaded.scenario.name
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        data = loaded.scenario.model_dump(mode="json")
    data.pop("topology", None)  # its sites and links are inlined
    path = folder / "scenario.yaml"
    path.write_text(f"# scenario {loaded.scenario.name}, given to testbed.sweep from Python\n"
                    + yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path, loaded.scenario.name


def _sweep_data(source: Any, fields: dict, prepare: Callable, base: Path, folder: Path) -> dict | None:
    """The sweep to write (None: a sweep file that runs as it is)."""
    from testbed.spec.load import read_yaml
    from testbed.sweep.api import SCENARIO_KEYS, is_sweep

    if isinstance(source, (str, os.PathLike)):
        path = Path(source).expanduser()
        if not path.is_file():
            return None  # the engine says what is wrong with it
        data = read_yaml(path, "sweep or scenario file")
        if is_sweep(data):
            if not fields:
                return None
            scenario = (path.resolve().parent / Path(data["scenario"]).expanduser()).resolve()
            return {"name": path.stem, **data, "scenario": str(scenario), **fields}
        if not any(k in data for k in SCENARIO_KEYS):
            return None
    elif isinstance(source, Mapping) and "scenario" in source and not any(k in source for k in SCENARIO_KEYS):
        data = dict(source)
        scenario = data["scenario"]
        if isinstance(scenario, (str, os.PathLike)):
            file = (base / Path(scenario).expanduser()).resolve()
            if not file.is_file():
                raise SpecError([(f"{WHERE}: scenario", f"file not found: {scenario} (relative to {base})")])
            data.setdefault("name", file.stem)
        else:
            file, name = _scenario_file(scenario, prepare, base, folder)
            data.setdefault("name", name)
        return {**data, "scenario": str(file), **fields}
    file, name = _scenario_file(source, prepare, base, folder)
    return {"name": name, "scenario": str(file), **fields}


def _temporary_out(name: str) -> Path:
    """A new sweep directory under the system's temporary folder, removed when Python exits."""
    out = Path(tempfile.mkdtemp(prefix=f"testbed-sweep-{name}-"))
    atexit.register(shutil.rmtree, out, True)
    return out


def _named(e: SpecError, path: Path) -> SpecError:
    """Problems that name the temporary sweep file, named ``sweep`` instead."""
    prefix = f"{path}: "
    return SpecError([(f"{WHERE}: {w[len(prefix):]}" if w.startswith(prefix) else w, m) for w, m in e.problems])


def _run_data(data: dict, folder: Path, out: Path, *, parallel: int | None, ray: str | None,
              substrate: str | None, force: bool):
    """Write the sweep, check it, plan it and run it (testbed.sweep.api, as ``testbed sweep``)."""
    import yaml

    from testbed.sweep import api as sweep_api
    from testbed.sweep.plan import plan_sweep
    from testbed.sweep.spec import load_sweep_file

    data = _plain(data, "")
    path = folder / "sweep.yaml"
    path.write_text("# a sweep given to testbed.sweep from Python\n"
                    + yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    try:
        sweep_file = dataclasses.replace(load_sweep_file(path), where=WHERE)
    except SpecError as e:
        raise _named(e, path) from None
    return sweep_api.run_table(plan_sweep(sweep_file, substrate), out, where=WHERE, parallel=parallel, ray=ray,
                               force=force)


def run_sweep(source: Any, out: str | os.PathLike | None, fields: dict, *, prepare: Callable,
              base: str | os.PathLike | None, parallel: int | None, ray: str | None, substrate: str | None,
              force: bool):
    """:func:`testbed.api.sweep` (which passes its ``prepare``: a scenario as a Prepared)."""
    from testbed.sweep import api as sweep_api

    base_dir = Path(base).expanduser().resolve() if base is not None else Path.cwd()
    with tempfile.TemporaryDirectory(prefix="testbed-sweep-input-") as tmp:
        folder = Path(tmp)
        data = _sweep_data(source, fields, prepare, base_dir, folder)
        name = (data or {}).get("name") or Path(os.fspath(source)).stem
        target = Path(out) if out is not None else _temporary_out(re.sub(r"[^A-Za-z0-9_.-]+", "-", str(name))[:40])
        try:
            if data is None:
                return sweep_api.sweep(source, target, parallel=parallel, ray=ray, substrate=substrate, force=force)
            return _run_data(data, folder, target, parallel=parallel, ray=ray, substrate=substrate, force=force)
        except BaseException:
            if out is None:  # nothing the caller could open: the path was never returned
                shutil.rmtree(target, ignore_errors=True)
            raise
