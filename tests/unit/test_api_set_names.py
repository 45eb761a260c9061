"""Overrides (``--set PATH=VALUE``, ``overrides={PATH: VALUE}``) are named in errors as typed, never
under the scenario file's path, with the nearest valid key or policy label suggested."""

from __future__ import annotations

from pathlib import Path

import pytest

import testbed
from testbed.cli import main
from testbed.errors import SpecError
from testbed.spec.override_errors import nearest_paths, owner, resolve

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "scenarios" / "quickstart.yaml"


@pytest.mark.parametrize("setting, line", [
    ("alpah=0.2", "--set alpah: unknown field (did you mean feasibility.alpha or "
                  "policies[feasibility_aware].alpha or policies[no_filter].alpha?)"),
    ("policies[feasibility_awar].alpha=0.2", "--set policies[feasibility_awar].alpha: policies: no entry with "
                                             "label or name 'feasibility_awar' (did you mean feasibility_aware?)"),
    ("policies[feasibility_aware].alpah=0.2", "--set policies[feasibility_aware].alpah: unknown field "
                                              "(did you mean alpha?)"),
    ("policies[feasibility_aware].alpha=-3", "--set policies[feasibility_aware].alpha: must be > 0"),
    ("feasibilty.alpha=0.2", "--set feasibilty.alpha: feasibilty: unknown field (did you mean feasibility?)"),
    ("traces.bandwith.cv=0.1", "--set traces.bandwith.cv: traces.bandwith: unknown field (did you mean bandwidth?)"),
    ("duraton_h=12", "--set duraton_h: unknown field (did you mean duration_h?)"),
])
def test_cli_names_the_override_as_typed(tmp_path, capsys, setting, line):
    assert main(["run", str(QUICKSTART), "--set", setting, "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {line}"), err
    assert str(QUICKSTART) not in err[0] and "quickstart.yaml" not in err[0]
    assert not (tmp_path / "r").exists()


def test_python_overrides_are_named_the_same_way():
    with pytest.raises(SpecError) as e:
        testbed.load(QUICKSTART, overrides={"policies[feasibility_aware].alpah": 0.2, "feasibilty.alpha": 0.2})
    assert sorted(w for w, _ in e.value.problems) == ["overrides feasibilty.alpha",
                                                      "overrides policies[feasibility_aware].alpah"]
    sc = testbed.load(QUICKSTART)
    with pytest.raises(SpecError) as e:  # an edited Scenario: the same names, the same suggestions
        testbed.load(sc, {"alpah": 0.2})
    [(where, msg)] = e.value.problems
    assert where == "overrides alpah" and msg.startswith("unknown field (did you mean feasibility.alpha")


def test_a_problem_no_override_caused_is_not_blamed_on_one():
    with pytest.raises(SpecError) as e:  # the rome-milan event outlives nothing; the link is what breaks
        testbed.load(QUICKSTART, overrides={"links[0].b": "paris"})
    wheres = [w for w, _ in e.value.problems]
    assert all(not w.startswith("overrides links[0].b") or w == "overrides links[0].b" for w in wheres)
    assert any(m.endswith("(with the overrides values applied)") for _, m in e.value.problems), e.value.problems


def test_resolve_and_owner():
    data = {"policies": ["static", {"name": "feasibility_aware", "alpha": 0.1}], "traces": {"bandwidth": {}}}
    assert resolve(data, "policies[feasibility_aware].alpha") == "policies[1].alpha"
    assert resolve(data, "policies[nope].alpha") == "policies[nope].alpha"
    assert resolve(data, "traces.bandwith.cv") == "traces.bandwith.cv"
    typed = {"policies[1].alpha": "policies[feasibility_aware].alpha"}
    assert owner("policies[1].alpha", "must be > 0", typed) == ("policies[feasibility_aware].alpha", "")
    assert owner("policies[1]", "must be > 0", typed) is None  # above it, and not a key it made
    assert owner("policies[1]", "unknown field", {"policies[1].x.y": "p"}) == ("p", "policies[1]")
    assert owner("links[0].a", "unknown site", typed) is None
    assert nearest_paths("alpah", {"feasibility": {"alpha": 0.1}, "seed": 1}) == ["feasibility.alpha"]
