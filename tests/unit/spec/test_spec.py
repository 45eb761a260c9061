"""Scenario validation: valid files load; every malformed one gives exit 2 and one line per
problem naming the field or file, never a traceback."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from testbed.cli import main
from testbed.errors import SpecError
from testbed.spec import load_scenario, scenario_from_dict
from tests.conftest import ROOT, small_scenario_dict


@pytest.mark.parametrize("name", ["quickstart.yaml", "paper-migration-5node-7day.yaml"])
def test_shipped_scenarios_are_valid(name):
    loaded = load_scenario(ROOT / "scenarios" / name)
    assert loaded.scenario.sites and loaded.scenario.policies
    assert len(loaded.sha256) == 64


def test_paper_scenario_has_its_policies_and_baselines_and_five_sites():
    sc = load_scenario(ROOT / "scenarios" / "paper-migration-5node-7day.yaml").scenario
    assert [p.name for p in sc.policies] == ["static", "placement_only", "energy_only", "feasibility_aware",
                                             "feasibility_aware_paper", "no_filter"]
    assert len(sc.sites) == 5 and sc.duration_h == 168


def _validate(tmp_path: Path, capsys, data=None, text=None) -> tuple[int, list[str]]:
    f = tmp_path / "s.yaml"
    f.write_text(text if text is not None else yaml.safe_dump(data), encoding="utf-8")
    code = main(["validate", str(f)])
    err = [line.removeprefix("error: ") for line in capsys.readouterr().err.strip().splitlines()]
    # every line names the file first (``FILE: field.path: message``); the checks below read the rest
    assert all(line.startswith(f"{f}") for line in err), err
    field_line = re.compile(rf"^{re.escape(str(f))}: ([\w.\[\]$-]+: .*)$")
    return code, [m.group(1) if (m := field_line.match(line)) else line for line in err]


def _with(path: list, value, **kw) -> dict:
    d = small_scenario_dict(**kw)
    node = d
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return d


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (["links", 0, "bandwidth_gbps"], -1, "links[0].bandwidth_gbps: must be > 0"),
        (["links", 0, "bandwidth_gbps"], "fast", "links[0].bandwidth_gbps: must be a number"),
        (["links", 0, "b"], "zurich", "links[0].b: unknown site 'zurich'"),
        (["sites", 1, "lat_deg"], 123, "sites[1].lat_deg: must be <= 90"),
        (["sites", 0, "nodes"], 0, "sites[0].nodes: must be >= 1"),
        (["sites", 0, "node_type"], "tpu-v9", "sites[0].node_type: unknown node type 'tpu-v9'"),
        (["duration_h"], 0, "duration_h: must be > 0"),
        (["step_s"], "five minutes", "step_s: must be a number"),
        (["workloads", "jobs", 0, "work_gpu_h"], -3, "workloads.jobs[0].work_gpu_h: must be > 0"),
        (["workloads", "jobs", 1, "origin"], "mars", "workloads.jobs[1].origin: unknown site 'mars'"),
        (["traces", "renewable", "default", "capacity_kw"], -2, "traces.renewable.default.capacity_kw: must be > 0"),
        (["traces", "renewable", "default", "kind"], "wind_farm", "traces.renewable.default: unknown kind 'wind_farm'"),
        (["policies"], ["static", "greedy"], "policies[1]: unknown policy 'greedy'"),
        (["policies"], [{"name": "feasibility_aware", "alpha": 3}], "policies[0].alpha: must be <= 1"),
        (["colour"], "blue", "colour: unknown field"),
    ],
)
def test_malformed_field_is_named(tmp_path, capsys, path, value, expected):
    code, err = _validate(tmp_path, capsys, _with(path, value))
    assert code == 2
    assert any(line.startswith(expected) for line in err), err
    assert not any("Traceback" in line for line in err)


def test_several_problems_one_line_each(tmp_path, capsys):
    d = small_scenario_dict()
    d["links"][0]["bandwidth_gbps"] = 0
    d["duration_h"] = -1
    code, err = _validate(tmp_path, capsys, d)
    assert code == 2
    assert len(err) == 2
    assert {e.split(":")[0] for e in err} == {"links[0].bandwidth_gbps", "duration_h"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "scenario file is empty"),
        ("   \n# only a comment\n", "scenario file is empty"),
        ("name: [unclosed\n", "not valid YAML"),
        ("- just\n- a list\n", "must be a YAML mapping"),
    ],
)
def test_unparseable_files(tmp_path, capsys, text, expected):
    code, err = _validate(tmp_path, capsys, text=text)
    assert code == 2 and len(err) == 1
    assert str(tmp_path / "s.yaml") in err[0] and expected in err[0]


def test_missing_scenario_file(tmp_path, capsys):
    code = main(["validate", str(tmp_path / "nope.yaml")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == [f"error: {tmp_path / 'nope.yaml'}: scenario file not found"]


def test_missing_trace_file_is_named(tmp_path, capsys):
    d = small_scenario_dict()
    d["traces"]["renewable"]["a"] = {"kind": "csv", "file": "no-such-trace.csv"}
    code, err = _validate(tmp_path, capsys, d)
    assert code == 2
    # where it was looked for, whole: beside the scenario, the folder above, the shipped files
    from testbed.spec.files import file_places

    places = ", ".join(str(p) for p in file_places("no-such-trace.csv", tmp_path))
    assert err == [f"traces.renewable.a.file: file not found: no-such-trace.csv (looked for {places})"]
    assert str(tmp_path / "no-such-trace.csv") in places


def test_missing_topology_file_is_named(tmp_path, capsys):
    d = small_scenario_dict()
    del d["sites"], d["links"]
    d["topology"] = "topologies/atlantis.yaml"
    code, err = _validate(tmp_path, capsys, d)
    assert code == 2 and len(err) == 1
    assert err[0].startswith("topology: file not found: topologies/atlantis.yaml (relative to the scenario file")
    assert "shipped topology by name: eu-5, global-7, us-100" in err[0]


def test_topology_file_is_merged(tmp_path):
    d = small_scenario_dict()
    del d["sites"], d["links"]
    d["topology"] = str(ROOT / "topologies" / "eu-5.yaml")
    d["workloads"]["jobs"] = [{"checkpoint_gb": 10, "work_gpu_h": 1, "origin": "rome"}]
    sc = scenario_from_dict(d)
    assert [s.name for s in sc.sites] == ["rome", "milan", "vienna", "amsterdam", "madrid"]
    assert len(sc.links) == 10


def test_duplicate_site_and_link(tmp_path):
    d = small_scenario_dict()
    d["sites"].append(dict(d["sites"][0]))
    d["links"].append({"a": "b", "b": "a", "bandwidth_gbps": 1})
    with pytest.raises(SpecError) as e:
        scenario_from_dict(d)
    where = [w for w, _ in e.value.problems]
    assert "sites[2].name" in where and "links[1]" in where


def test_every_site_needs_a_renewable_trace():
    d = small_scenario_dict()
    d["traces"]["renewable"] = {"a": d["traces"]["renewable"]["default"]}
    with pytest.raises(SpecError) as e:
        scenario_from_dict(d)
    assert e.value.problems == [("traces.renewable", "no trace for site 'b' and no 'default'")]


def test_policy_labels_must_be_unique():
    d = small_scenario_dict(policies=["static", "static"])
    with pytest.raises(SpecError) as e:
        scenario_from_dict(d)
    assert "labels must be unique" in e.value.problems[0][1]
    d = small_scenario_dict(policies=[{"name": "static"}, {"name": "static", "label": "static-2"}])
    assert len(scenario_from_dict(d).policies) == 2


def test_epsilon_limited_to_half():
    with pytest.raises(SpecError) as e:
        scenario_from_dict(small_scenario_dict(policies=[{"name": "feasibility_aware", "epsilon": 0.7}]))
    assert e.value.problems[0][0] == "policies[0].epsilon"


def test_validate_ok_exit_zero(capsys):
    assert main(["validate", str(ROOT / "scenarios" / "quickstart.yaml")]) == 0
    assert "ok" in capsys.readouterr().out


def test_schema_is_json_schema(capsys):
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert "$schema" in schema and {"sites", "links", "traces", "workloads", "policies"} <= set(schema["properties"])
    assert main(["schema", "--topology"]) == 0
    assert "sites" in json.loads(capsys.readouterr().out)["properties"]


def test_documented_example_is_a_valid_scenario():
    """The commented example in docs/reference/scenario-files.md (moved there from the README)."""
    import re

    text = (ROOT / "docs" / "reference" / "scenario-files.md").read_text()
    block = re.search(r"```yaml\n(name: quickstart.*?)```", text, re.S).group(1)
    sc = scenario_from_dict(yaml.safe_load(block), ROOT)
    assert sc.name == "quickstart" and "my-gpu" in sc.all_node_types()
