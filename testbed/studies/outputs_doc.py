"""docs/outputs.md, generated: the output files' columns and keys, from the code that writes them.

Every file a run, a sweep or a report writes is described once, in ``outputs.yaml`` beside this
module: per file, its columns (or a JSON file's keys) with unit, presence and description, in the
order the document shows them, and the prose around them. The dtype of every column that the
recorder declares (:data:`testbed.controller.run_log.DECLARED_DTYPES`: all of ``migrations``,
``decisions``, ``candidates`` and ``candidate_scores``, the typed ones of ``jobs`` and ``power``) is
taken from the code, not from the YAML; :func:`problems` names a declared column the document lacks
and, for a table the recorder declares whole, a documented column the recorder does not write.

``python -m testbed.studies.outputs_doc`` writes the document (``--check``: exits 1 when the file
differs from what the code gives); ``tests/unit/studies/test_outputs_doc.py`` fails when it differs.
"""

from __future__ import annotations

import argparse
import sys
from functools import cache
from pathlib import Path

import yaml

CATALOG = Path(__file__).with_name("outputs.yaml")
DOC = Path(__file__).resolve().parents[2] / "docs" / "outputs.md"
_PER_POLICY = "<policy>/{}.parquet"
_ADDED_TO_EVERY_TABLE = ("policy", "label", "time", "time_decision")  # with_policy / with_time


@cache
def catalog() -> list[dict]:
    """The document's blocks: ``{"markdown": text}`` or a file section (``file``, ``study``,
    ``kind``, ``intro``, ``columns``)."""
    return yaml.safe_load(CATALOG.read_text(encoding="utf-8"))["blocks"]


def _declared() -> tuple[dict[str, dict[str, str]], tuple[str, ...]]:
    from testbed.controller.run_log import COMPLETE_TABLES, DECLARED_DTYPES

    return ({_PER_POLICY.format(t): d for t, d in DECLARED_DTYPES.items()},
            tuple(_PER_POLICY.format(t) for t in COMPLETE_TABLES))


def _migration_section(block: dict) -> bool:
    return block.get("study") in (None, "migration")


def problems() -> list[str]:
    """Where the catalog and the code's declarations disagree (empty: they agree)."""
    declared, complete = _declared()
    out = []
    for block in catalog():
        f = block.get("file")
        if f not in declared or not _migration_section(block):
            continue
        documented = {c["name"] for c in block["columns"]}
        for col in declared[f]:
            if col not in documented:
                out.append(f"{f}: the recorder writes {col!r}, which {CATALOG.name} does not describe")
        if f in complete:
            for col in documented - set(declared[f]) - set(_ADDED_TO_EVERY_TABLE):
                out.append(f"{f}: {CATALOG.name} describes {col!r}, which the recorder does not write")
    return out


def _row(block: dict, col: dict, declared: dict[str, dict[str, str]]) -> str:
    dtype = declared.get(block["file"], {}).get(col["name"]) if _migration_section(block) else None
    dtype = dtype or col.get("type")
    if dtype is None:
        raise ValueError(f"{CATALOG.name}: {block['file']}: {col['name']}: no type here and none declared in code")
    return f"| `{col['name']}` | `{dtype}` | {col['unit']} | {col['presence']} | {col['description']} |"


def render() -> str:
    """The document's text."""
    declared, _ = _declared()
    parts = []
    for block in catalog():
        if "markdown" in block:
            parts.append(block["markdown"])
            continue
        head = f"### `{block['file']}`" + (f" ({block['study']})" if block.get("study") else "")
        kind = block["kind"]
        dtype_head = "dtype" if kind == "column" else "type"
        table = [f"| {kind} | {dtype_head} | unit | presence | description |", "|---|---|---|---|---|"]
        table += [_row(block, c, declared) for c in block["columns"]]
        parts.append("\n".join([head, block["intro"], *table]))
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m testbed.studies.outputs_doc", description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when docs/outputs.md differs from the code's")
    ap.add_argument("--out", type=Path, default=DOC, help="where to write (default: docs/outputs.md)")
    a = ap.parse_args(argv)
    bad = problems()
    if bad:
        print("\n".join(bad), file=sys.stderr)
        return 1
    text = render()
    if a.check:
        same = a.out.is_file() and a.out.read_text(encoding="utf-8") == text
        if not same:
            print(f"{a.out}: differs from the code's declarations: run python -m testbed.studies.outputs_doc",
                  file=sys.stderr)
        return 0 if same else 1
    a.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
