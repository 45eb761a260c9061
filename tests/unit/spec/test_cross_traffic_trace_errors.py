"""A scenario's cross-traffic ``trace:`` CSV: every malformed file is one error naming the field,
the file and the line (exit 2, no traceback), never its text; spreadsheet CSVs (a byte-order mark,
spaces around the header's names) are read; a missing file says where it was looked for. And a
``str | list`` union field (``cross_traffic``) reports only the alternative its value is of."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from testbed.cli import main
from testbed.errors import SpecError
from testbed.spec.cross_traffic import LoadTraceError, read_load_trace
from testbed.spec.files import resolve_file
from testbed.spec.load import scenario_from_dict

SECRET = "SECRET_TOKEN_abc123"


def _scenario(cross_traffic: object) -> dict:
    return {
        "name": "xt", "duration_h": 12,
        "sites": [{"name": "a", "lat_deg": 45.0, "lon_deg": 9.0, "nodes": 2},
                  {"name": "b", "lat_deg": 48.0, "lon_deg": 11.0, "nodes": 2}],
        "links": [{"a": "a", "b": "b", "bandwidth_gbps": 1, "latency_ms": 20}],
        "traces": {"renewable": {"default": {"kind": "solar", "capacity_kw": 3.0}}},
        "workloads": {"jobs": [{"id": "j1", "checkpoint_gb": 4, "work_gpu_h": 6, "origin": "a"}]},
        "policies": ["no_filter"],
        "cross_traffic": cross_traffic,
    }


def _validate(tmp_path: Path, capsys, csv_bytes: bytes | None, trace: str = "xt.csv") -> tuple[int, list[str]]:
    """``testbed validate`` of a scenario whose one entry names ``trace`` (written with ``csv_bytes``)."""
    if csv_bytes is not None:
        (tmp_path / trace).write_bytes(csv_bytes)
    scenario = tmp_path / "sc.yaml"
    scenario.write_text(yaml.safe_dump(_scenario([{"src": "a", "dst": "b", "trace": trace}])))
    rc = main(["validate", str(scenario)])
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    return rc, out.err.strip().splitlines()


def test_a_header_without_the_columns_is_named_by_what_is_missing_never_by_its_text(tmp_path, capsys):
    rc, err = _validate(tmp_path, capsys, f"{SECRET},password=hunter2\n1,2\n".encode())
    assert rc == 2 and len(err) == 1, err
    assert err[0].startswith(f"error: {tmp_path / 'sc.yaml'}: cross_traffic[0].trace: {tmp_path / 'xt.csv'}: ")
    assert "missing t_s and flows" in err[0] and "2 column(s)" in err[0]
    assert SECRET not in err[0] and "hunter2" not in err[0]


def test_a_header_with_one_column_missing_names_that_one(tmp_path):
    (tmp_path / "t.csv").write_text("t_s,flowz\n0,1\n")
    with pytest.raises(LoadTraceError, match=r"missing flows \(its header has 2 column") as e:
        read_load_trace(tmp_path / "t.csv")
    assert "flowz" not in str(e.value)


def test_a_symlink_to_a_secret_file_never_shows_its_lines(tmp_path):
    secret = tmp_path / "shadow"
    secret.write_text("r00tx:$6$saltsalt$HASHHASHHASH:19000:0:99999:7:::\nd4emon:*:19000:0:99999:7:::\n")
    (tmp_path / "t.csv").symlink_to(secret)
    with pytest.raises(LoadTraceError) as e:
        read_load_trace(tmp_path / "t.csv")
    assert "r00tx" not in str(e.value) and "HASH" not in str(e.value) and "d4emon" not in str(e.value)


@pytest.mark.parametrize("body, line, says", [
    (b"t_s,flows\n0,1\n5\n", 3, "has 1 field(s) where the header has 2"),                       # a short row
    (b"t_s,flows\n0,1\n5,2,7\n", 3, "has 3 field(s) where the header has 2"),                   # a long row
    (b"t_s,flows\n0," + b"1" * 200_000 + b"\n", 2, "not valid CSV (field larger than field limit"),
    (b"t_s,flows\n0,1\n5,\"2\"x\n", 3, "not valid CSV (',' expected after '\"')"),                  # a stray quote
    (b"t_s,flows\n0,1\n5,\"2\n", 3, "not valid CSV (unexpected end of data)"),                  # an unclosed one
    (b"t_s,flows\n0,1\n5,2\x00\n", 3, "flows is not a number"),                                  # a NUL
    (b"t_s,flows\n0,1\n\xff5,2\n", 3, "not UTF-8 text (byte 15)"),
    (b"t_s,flows\n0,1\n5,abc\n", 3, "flows is not a number"),
])
def test_a_malformed_row_is_one_error_naming_the_file_and_line(tmp_path, capsys, body, line, says):
    rc, err = _validate(tmp_path, capsys, body)
    assert rc == 2 and len(err) == 1, err
    assert f"cross_traffic[0].trace: {tmp_path / 'xt.csv'}: line {line}: {says}" in err[0], err[0]
    assert "abc" not in err[0].split("cross_traffic[0]")[1]  # no field's text


def test_a_spreadsheet_csv_with_a_byte_order_mark_and_spaced_names_is_read(tmp_path):
    (tmp_path / "t.csv").write_bytes(b"\xef\xbb\xbf t_s , flows ,udp_gbps \r\n0,1,0.5\r\n\r\n10, 2 ,\r\n")
    tr = read_load_trace(tmp_path / "t.csv")
    assert tr.times_s == (0.0, 10.0) and tr.flows == (1, 2) and tr.udp_gbps == (0.5, 0.0)


def test_a_byte_order_mark_does_not_shift_the_position_of_a_bad_byte(tmp_path):
    (tmp_path / "t.csv").write_bytes(b"\xef\xbb\xbft_s,flows\n0,1\n\xff5,2\n")
    with pytest.raises(LoadTraceError, match=r"line 3: not UTF-8 text \(byte 18\)"):
        read_load_trace(tmp_path / "t.csv")


def test_a_missing_trace_says_each_absolute_path_it_was_looked_for_at(tmp_path, capsys):
    from testbed.spec.files import file_places as trace_places

    rc, err = _validate(tmp_path, capsys, None, trace="xt-missing.csv")
    assert rc == 2 and len(err) == 1, err
    places = trace_places("xt-missing.csv", tmp_path)
    assert places[:2] == [tmp_path / "xt-missing.csv", tmp_path.parent / "xt-missing.csv"]
    assert f"file not found: xt-missing.csv (looked for {', '.join(map(str, places))})" in err[0], err[0]
    assert all(p.is_absolute() for p in places)


def test_the_places_listed_are_where_the_loader_looks_in_that_order(tmp_path):
    from testbed.spec.files import file_places as trace_places

    base = tmp_path / "scenarios"
    base.mkdir()
    places = trace_places("t.csv", base)
    places[1].write_text("t_s,flows\n0,1\n")  # the folder above the scenario's
    assert resolve_file("t.csv", base) == places[1].resolve()
    places[0].write_text("t_s,flows\n0,1\n")  # beside it: found first
    assert resolve_file("t.csv", base) == places[0].resolve()
    assert trace_places(str(tmp_path / "abs.csv"), base) == [tmp_path / "abs.csv"]


# ------------------------------------------------------------------------ a str | list union's errors


def _problems(cross_traffic: object) -> list[tuple[str, str]]:
    with pytest.raises(SpecError) as e:
        scenario_from_dict(_scenario(cross_traffic))
    return e.value.problems


def test_an_error_inside_a_list_entry_is_not_followed_by_the_load_level_alternative():
    assert _problems([{"src": "a", "dst": "b", "tpc": {"flows": 3}}]) == [
        ("cross_traffic[0].tpc", "unknown field (did you mean tcp?)")]
    assert _problems([5]) == [("cross_traffic[0]", "must be a mapping (got 5)")]


def test_an_unknown_level_gets_only_the_level_error():
    [(where, msg)] = _problems("medium")
    assert where == "cross_traffic" and msg.startswith("unknown load level 'medium'")


def test_a_value_of_neither_kind_still_names_both():
    [(where, msg)] = _problems(5)
    assert where == "cross_traffic" and "must be a list" in msg and "must be one of" in msg


def test_the_filter_is_general_to_any_list_or_literal_union():
    from typing import Literal

    from pydantic import BaseModel, ValidationError

    from testbed.spec.errors_format import problems_from

    class Item(BaseModel):
        n: int

    class M(BaseModel):
        f: list[Item] | Literal["all", "none"]

    def problems(value: object) -> list[tuple[str, str]]:
        with pytest.raises(ValidationError) as e:
            M.model_validate({"f": value})
        return problems_from(e.value, frozenset())

    assert problems([{"n": "x"}]) == [("f[0].n", "must be an integer (got 'x')")]
    assert problems("some") == [("f", "must be one of 'all' or 'none' (got 'some')")]
    assert problems(3) == [("f", "must be a list (got 3); or must be one of 'all' or 'none' (got 3)")]
