"""The shape every output table is written in (docs/outputs.md is its schema, tested):

- typed columns: a column keeps its dtype when it holds no value (``typed``, ``dtypes_of``): ``float64``
  (missing = NaN), ``Int64`` / ``boolean`` (nullable), ``str`` (missing = NaN), never an all-null ``object``;
- a UTC ``time`` column right after every ``t_s`` offset (``with_time``), from the scenario's ``start``;
- the policy that ran in every per-policy table: ``policy`` (its name) and ``label`` (``with_policy``);
- traces long (tidy): one row per sample, ``site`` or ``link``, ``quantity``, ``unit``, ``value``
  (``tidy_traces``).
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timezone

import pandas as pd

# a Python annotation -> the column's dtype
_DTYPES = {
    "float": "float64", "float | None": "float64",
    "int": "int64", "int | None": "Int64",
    "bool": "boolean", "bool | None": "boolean",
    "str": "str", "str | None": "str",
}


def dtype_of(annotation: object) -> str | None:
    """The column dtype of a field annotated ``annotation`` (``float | None`` -> ``float64``; the
    annotation's text, as postponed annotations keep it); None for a type that is no column."""
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
    parts = sorted(p.strip() for p in text.split("|"))
    key = " | ".join(p for p in parts if p != "None") + (" | None" if "None" in parts else "")
    return _DTYPES.get(key)


def dtypes_of(cls: type, *, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """Column -> dtype of a dataclass's fields (those whose annotation maps to a column dtype)."""
    out = {}
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        dt = dtype_of(f.type)
        if dt is not None:
            out[f.name] = dt
    return out


def typed(df: pd.DataFrame, dtypes: dict[str, str]) -> pd.DataFrame:
    """``df`` with the listed columns cast to their dtype (a column holding no value included)."""
    df = df.copy()
    for column, dt in dtypes.items():
        if column in df.columns:
            s = df[column]
            if dt in ("float64", "Int64") and s.dtype == object:
                s = pd.to_numeric(s, errors="raise")
            df[column] = s.astype(dt)
    return df


def utc_start(start: datetime) -> pd.Timestamp:
    """The scenario's ``start`` as a UTC timestamp (a naive ``start`` is UTC)."""
    ts = pd.Timestamp(start)
    return ts.tz_localize(timezone.utc) if ts.tzinfo is None else ts.tz_convert(timezone.utc)


def with_time(df: pd.DataFrame, start: datetime, offset: str = "t_s", name: str = "time") -> pd.DataFrame:
    """``df`` with ``name`` (UTC, ``datetime64[us, UTC]``) = ``start`` + ``offset`` seconds, placed
    right after ``offset``. A table without ``offset`` is returned as it is."""
    if offset not in df.columns:
        return df
    df = df.copy()
    values = utc_start(start) + pd.to_timedelta(pd.to_numeric(df[offset]).astype("float64"), unit="s")
    if name in df.columns:
        df = df.drop(columns=[name])
    df.insert(df.columns.get_loc(offset) + 1, name, pd.Series(values, index=df.index).astype("datetime64[us, UTC]"))
    return df


def with_policy(df: pd.DataFrame, policy: str, label: str) -> pd.DataFrame:
    """``df`` with first columns ``policy`` (the policy's name, as in summary.json) and ``label`` (the
    scenario entry's label, the results folder), replacing any it had."""
    df = df.drop(columns=[c for c in ("policy", "label") if c in df.columns])
    df.insert(0, "label", pd.Series([label] * len(df), index=df.index, dtype="str"))
    df.insert(0, "policy", pd.Series([policy] * len(df), index=df.index, dtype="str"))
    return df


# A trace series name ``QUANTITY_UNIT:WHERE`` (what studies return, testbed.studies.base.Study.traces)
# -> (quantity, unit). WHERE is a site, or a link ``a->b``.
TRACE_SERIES: dict[str, tuple[str, str]] = {
    "renewable_kw": ("renewable_power", "kW"),
    "available_kw": ("available_power", "kW"),
    "bandwidth_gbps": ("bandwidth", "Gbit/s"),
    "carbon_g_per_kwh": ("carbon_intensity", "g/kWh"),
    "price_per_kwh": ("electricity_price", "currency/kWh"),
}
# a series of another study (``QUANTITY_UNIT`` not listed above): the unit its name ends with
UNIT_SUFFIXES = {"_kw": "kW", "_kwh": "kWh", "_w": "W", "_gbps": "Gbit/s", "_s": "s", "_h": "h",
                 "_g_per_kwh": "g/kWh", "_per_kwh": "currency/kWh", "_frac": "fraction"}
TRACE_COLUMNS = {"t_s": "float64", "time": "datetime64[us, UTC]", "site": "str", "link": "str", "quantity": "str",
                 "unit": "str", "value": "float64"}


def split_series(series: str) -> tuple[str, str, str | None, str | None]:
    """``QUANTITY_UNIT:WHERE`` -> (quantity, unit, site, link): a name of TRACE_SERIES, or any name that
    ends with a unit of UNIT_SUFFIXES (``probe_kw`` -> ``probe``, kW); ValueError otherwise."""
    head, sep, where = series.partition(":")
    suffix = next((s for s in sorted(UNIT_SUFFIXES, key=len, reverse=True) if head.endswith(s) and head != s[1:]), None)
    if not sep or not where or (head not in TRACE_SERIES and suffix is None):
        raise ValueError(f"trace series {series!r}: expected QUANTITY_UNIT:SITE or QUANTITY_UNIT:A->B "
                         f"(e.g. {', '.join(TRACE_SERIES)}; units {', '.join(UNIT_SUFFIXES)})")
    quantity, unit = TRACE_SERIES.get(head) or (head[: -len(suffix)], UNIT_SUFFIXES[suffix])
    return (quantity, unit, None, where) if "->" in where else (quantity, unit, where, None)


def tidy_traces(named: list[tuple[str, pd.DataFrame]], start: datetime) -> pd.DataFrame:
    """One row per trace sample: ``t_s``, ``time``, ``site`` (or null), ``link`` (``a->b``, or null),
    ``quantity``, ``unit``, ``value``. ``named``: (series name, frame with ``time_s`` and ``value``)."""
    frames = []
    for series, frame in named:
        quantity, unit, site, link = split_series(series)
        frames.append(pd.DataFrame({"t_s": frame["time_s"].to_numpy(dtype=float), "site": site, "link": link,
                                    "quantity": quantity, "unit": unit,
                                    "value": frame["value"].to_numpy(dtype=float)}))
    df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=[c for c in TRACE_COLUMNS if c != "time"])
    df = typed(df, {c: t for c, t in TRACE_COLUMNS.items() if c != "time"})
    return with_time(df, start)
