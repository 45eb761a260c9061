"""docs/outputs.md as data: the schema of every output file, read from the document's tables, and
the checks that a file matches it (tests/unit/test_outputs_schema.py).

The document has a unit table (``## Units in names``: suffix -> unit) and, per file, a heading
``### `PATH` `` followed by a table ``| column | dtype | unit | presence | description |`` (``key``
and a JSON type for JSON files; alternatives joined by ``or``: ``number or null``). ``PATH`` may hold
``<policy>`` (a policy's results folder)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from tests.conftest import ROOT

DOC = ROOT / "docs" / "outputs.md"
NO_UNIT = "-"
ALWAYS = "always"


@dataclass(frozen=True)
class Field:
    name: str
    dtype: str
    unit: str
    presence: str
    description: str


def _rows(lines: list[str], start: int) -> tuple[list[list[str]], int]:
    """The table starting at or after ``lines[start]``: its body rows (cells stripped), and the next line."""
    i = start
    while i < len(lines) and not lines[i].startswith("|"):
        i += 1
    rows = []
    while i < len(lines) and lines[i].startswith("|"):
        cells = [c.strip() for c in lines[i].strip().strip("|").split("|")]
        rows.append(cells)
        i += 1
    return rows[2:], i  # header and separator dropped


def _name(cell: str) -> str:
    return cell.strip("`")


def load(doc: Path = DOC) -> tuple[dict[str, str], dict[str, dict[str, Field]]]:
    """(unit suffixes: suffix -> unit, files: path pattern -> {name: Field})."""
    lines = doc.read_text(encoding="utf-8").splitlines()
    units: dict[str, str] = {}
    files: dict[str, dict[str, Field]] = {}
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("## Units in names"):
            rows, i = _rows(lines, i + 1)
            units = {_name(r[0]): r[1] for r in rows}
            continue
        m = re.match(r"^### `([^`]+)`(?: \((migration|federated)\))?", line)
        if m:
            rows, i = _rows(lines, i + 1)
            fields = {}
            for r in rows:
                assert len(r) == 5, f"{doc}: {m.group(1)}: a row needs 5 cells: {r}"
                f = Field(_name(r[0]), _name(r[1]), _name(r[2]), r[3], r[4])
                assert f.name not in fields, f"{doc}: {m.group(1)}: {f.name} documented twice"
                fields[f.name] = f
            files[key(m.group(1), m.group(2))] = fields
            continue
        i += 1
    return units, files


def unit_of(name: str, units: dict[str, str]) -> str | None:
    """The unit a column name says, by the document's suffixes (longest first); a unit suffix may be
    followed by a qualifier (``round_s_pooled``); ``time`` and ``time_*`` are UTC instants."""
    ordered = sorted(units, key=len, reverse=True)
    for suffix in ordered:
        if name == suffix.lstrip("_") or name.endswith(suffix):
            return units[suffix]
    if name == "time" or name.startswith("time_"):
        return "UTC"
    for suffix in ordered:
        if suffix.startswith("_") and f"{suffix}_" in name:
            return units[suffix]
    return None


def key(pattern: str, study: str | None) -> str:
    """A section's key: ``PATH``, or ``STUDY:PATH`` for a file whose schema depends on the study."""
    return f"{study}:{pattern}" if study else pattern


def pattern_of(rel: str, labels: set[str]) -> str:
    parts = rel.split("/")
    if len(parts) == 2 and parts[0] in labels:
        return f"<policy>/{parts[1]}"
    return rel


def json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def columns_of(path: Path) -> dict[str, str]:
    """name -> dtype (tables) or JSON type (JSON objects) of one output file."""
    if path.suffix == ".parquet":
        return {c: str(t) for c, t in pd.read_parquet(path).dtypes.items()}
    if path.suffix == ".csv":
        return {c: str(t) for c, t in pd.read_csv(path).dtypes.items()}
    if path.suffix == ".json":
        return {k: json_type(v) for k, v in json.loads(path.read_text(encoding="utf-8")).items()}
    raise ValueError(f"{path}: not a table or a JSON file")


def problems(path: Path, pattern: str, study: str | None, files: dict[str, dict[str, Field]],
             placeholders: dict[str, str] | None = None) -> list[str]:
    """What in ``path`` differs from its section of the document (empty: it matches). ``placeholders``:
    column -> the documented row that stands for it (a sweep's ``<parameter>`` and ``<metric>`` columns)."""
    doc = files.get(key(pattern, study or ""), files.get(pattern))
    if doc is None:
        return [f"{pattern}: no section in docs/outputs.md"]
    found = columns_of(path)
    stand_in = {c: ph for c, ph in (placeholders or {}).items() if c in found and ph in doc}
    doc = {**{c: f for c, f in doc.items() if f.name not in stand_in.values()},
           **{c: doc[ph] for c, ph in stand_in.items()}}
    out = [f"{pattern}: {c} is not documented" for c in found if c not in doc]
    out += [f"{pattern}: {c} is documented as {f.presence} but missing" for c, f in doc.items()
            if f.presence == ALWAYS and c not in found]
    for c, t in found.items():
        if c not in doc:
            continue
        allowed = {a.strip() for a in doc[c].dtype.split(" or ")}
        if t not in allowed:
            out.append(f"{pattern}: {c} is {t}, documented {doc[c].dtype}")
    return out
