"""docs/outputs.md is generated from the code (testbed.studies.outputs_doc): the page equals what the
description and the recorder's declared columns give, and a column the recorder adds, drops or retypes
shows up in the page or as a problem."""

from __future__ import annotations

import pytest

from testbed.controller import run_log
from testbed.studies import outputs_doc


def test_the_page_is_what_the_code_gives():
    assert outputs_doc.problems() == []
    assert outputs_doc.DOC.read_text(encoding="utf-8") == outputs_doc.render(), \
        "docs/outputs.md is stale: run python -m testbed.studies.outputs_doc"
    assert outputs_doc.main(["--check"]) == 0


def test_a_column_the_recorder_adds_or_drops_is_a_problem(monkeypatch):
    dtypes = {**run_log.DECLARED_DTYPES, "migrations": {**run_log.DECLARED_DTYPES["migrations"], "new_thing_s": "float64"}}
    monkeypatch.setattr(run_log, "DECLARED_DTYPES", dtypes)
    assert outputs_doc.problems() == [
        "<policy>/migrations.parquet: the recorder writes 'new_thing_s', which outputs.yaml does not describe"]
    dropped = {k: v for k, v in run_log.MIGRATION_DTYPES.items() if k != "outcome_basis"}
    monkeypatch.setattr(run_log, "DECLARED_DTYPES", {**run_log.DECLARED_DTYPES, "migrations": dropped})
    assert outputs_doc.problems() == [
        "<policy>/migrations.parquet: outputs.yaml describes 'outcome_basis', which the recorder does not write"]
    assert outputs_doc.main(["--check"]) == 1


def test_a_declared_dtype_comes_from_the_code(monkeypatch, tmp_path):
    retyped = {**run_log.DECLARED_DTYPES["decisions"], "decision": "Int64"}
    monkeypatch.setattr(run_log, "DECLARED_DTYPES", {**run_log.DECLARED_DTYPES, "decisions": retyped})
    text = outputs_doc.render()
    section = text[text.index("### `<policy>/decisions.parquet`"):]
    assert "| `decision` | `Int64` |" in section.split("### ", 2)[1]
    assert outputs_doc.main(["--check", "--out", str(outputs_doc.DOC)]) == 1  # the page says int64: stale
    out = tmp_path / "o.md"
    assert outputs_doc.main(["--out", str(out)]) == 0 and out.read_text(encoding="utf-8") == text


def test_a_column_with_no_type_anywhere_is_refused(monkeypatch):
    blocks = [{"file": "x.parquet", "kind": "column", "intro": "", "columns": [
        {"name": "a", "unit": "-", "presence": "always", "description": "d"}]}]
    monkeypatch.setattr(outputs_doc, "catalog", lambda: blocks)
    with pytest.raises(ValueError, match="x.parquet: a: no type here and none declared in code"):
        outputs_doc.render()
