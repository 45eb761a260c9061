"""What a swept parameter is, in words and units, for axis labels and file names.

A sweep names its axes either by the field they set (``traces.bandwidth.steady_degradation_pct``)
or by a variable (``$deg``) that its variants substitute into fields. A variable's meaning is read
from the trials' own overrides (trial.json): the fields whose value equals the variable's value in
every trial that sets them. The field's name then gives the label (a table of known fields, else
its name with the unit suffix spelled out).
"""

from __future__ import annotations

import re

from testbed.analysis.names import PARAM_PREFIX, param_column

_KNOWN = {
    "steady_degradation_pct": "bandwidth degradation (%)",
    "degradation_pct": "bandwidth degradation (%)",
    "alpha": "α: migration budget (fraction of the window)",
    "epsilon": "risk budget ε (accepted overrun probability)",
    "capacity_kw": "renewable capacity per site (kW)",
    "jobs_per_day": "job arrivals (jobs per day)",
    "time_scale": "emulation time scale (scenario s per wall s)",
}
_FORECAST = {"noise_pct": "noise (%)", "bias_pct": "bias (%)"}
_UNITS = (("_pct", " (%)"), ("_kw", " (kW)"), ("_gbps", " (Gbit/s)"), ("_gb", " (GB)"), ("_h", " (h)"),
          ("_s", " (s)"), ("_ms", " (ms)"))


def _leaves(value, path: str):
    """(field path, value) for every scalar in an override value; list items share ``path[]``."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, f"{path}.{k}")
    elif isinstance(value, list):
        for v in value:
            yield from _leaves(v, f"{path}[]")
    else:
        yield path, value


def param_path(column: str, runs: list) -> str:
    """The path a parameter column stands for (``param_feasibility_alpha`` -> ``feasibility.alpha``),
    from the runs' parameters; the column without its prefix when no run has it."""
    for run in runs:
        for path in getattr(run, "params", None) or {}:
            if param_column(path) == column:
                return path
    return column.removeprefix(PARAM_PREFIX)


def fields_of(param: str, runs: list) -> list[str]:
    """The fields a swept parameter sets: itself when it names a field, else (a ``$variable``)
    the override fields equal to it in every trial that has both."""
    name = param_path(param, runs)
    if not name.startswith("$"):
        return [name]
    seen: dict[str, bool] = {}
    for run in runs:
        if name not in run.params:
            continue
        for path, value in (leaf for k, v in run.overrides.items() for leaf in _leaves(v, k)):
            same = value == run.params[name] and not isinstance(value, bool)
            seen[path] = seen.get(path, True) and same
    return [p for p, always in seen.items() if always]


def label_of_field(path: str) -> str:
    leaf = re.sub(r"\[.*?\]", "", path).split(".")[-1]
    if leaf in _FORECAST and "forecast" in path:
        what = "window" if ".window." in path else "bandwidth" if "bandwidth" in path else ""
        return f"{what} forecast {_FORECAST[leaf]}".strip()
    if leaf in _KNOWN:
        return _KNOWN[leaf]
    for suffix, unit in _UNITS:
        if leaf.endswith(suffix):
            return leaf.removesuffix(suffix).replace("_", " ") + unit
    return leaf.replace("_", " ")


def axis_label(param: str, runs: list) -> str:
    """The quantity a swept parameter is, with its unit (its own name when nothing is known)."""
    labels = list(dict.fromkeys(label_of_field(f) for f in fields_of(param, runs)))
    return " / ".join(labels) if labels else param_path(param, runs).lstrip("$")


def file_stem(param: str) -> str:
    """A file-name-safe form of a parameter name: letters, digits and ``_`` only."""
    return re.sub(r"_+", "_", re.sub(r"[^A-Za-z0-9]+", "_", param.removeprefix(PARAM_PREFIX))).strip("_") or "param"
