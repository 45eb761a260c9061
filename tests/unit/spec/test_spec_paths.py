"""Relative paths in a scenario resolve from the file that names them, never from the working
directory; shipped topologies are found by name (``topology: eu-5``) and shipped files by their
repository path, so the examples run from any folder and a copied shipped scenario finds its data."""

from __future__ import annotations

import shutil

import pytest
import yaml

from testbed.cli import main
from testbed.errors import SpecError
from testbed.spec import load_scenario, scenario_from_dict
from testbed.spec.files import builtin_topologies, resolve_file
from tests.conftest import ROOT, small_scenario_dict


@pytest.fixture()
def elsewhere(tmp_path, monkeypatch):
    """Run from a folder that holds none of the repository's files."""
    folder = tmp_path / "cwd"
    folder.mkdir()
    monkeypatch.chdir(folder)
    return folder


def test_the_plugin_example_validates_from_any_folder(elsewhere, capsys):
    path = ROOT / "examples" / "policies" / "window_greedy.yaml"
    assert main(["validate", str(path)]) == 0, capsys.readouterr().err
    assert load_scenario(path).scenario.sites[0].name == "rome"  # eu-5 by name


def test_a_copied_shipped_scenario_still_finds_its_data(elsewhere, capsys):
    copy = elsewhere / "mine.yaml"
    shutil.copy(ROOT / "scenarios" / "carbon-price.yaml", copy)  # names data/carbon-paris-48h.csv
    assert main(["validate", "mine.yaml"]) == 0, capsys.readouterr().err
    src = load_scenario(copy).scenario.traces.carbon.sites["paris"]
    assert src.file == str((ROOT / "scenarios" / "data" / "carbon-paris-48h.csv").resolve())


def test_a_file_beside_the_scenario_wins_and_the_working_directory_is_never_searched(tmp_path, monkeypatch):
    (tmp_path / "here").mkdir()
    (tmp_path / "cwd").mkdir()
    (tmp_path / "cwd" / "site-a.csv").write_text("timestamp,value\n0,1.0\n")
    monkeypatch.chdir(tmp_path / "cwd")
    assert resolve_file("site-a.csv", tmp_path / "here") is None  # only in the working directory
    (tmp_path / "here" / "site-a.csv").write_text("timestamp,value\n0,2.0\n")
    assert resolve_file("site-a.csv", tmp_path / "here") == (tmp_path / "here" / "site-a.csv").resolve()


def test_a_trace_file_in_the_working_directory_only_is_not_found(tmp_path, monkeypatch):
    (tmp_path / "cwd").mkdir()
    (tmp_path / "cwd" / "site-a.csv").write_text("timestamp,value\n0,1.0\n86400,1.0\n")
    monkeypatch.chdir(tmp_path / "cwd")
    d = small_scenario_dict()
    d["traces"]["renewable"]["a"] = {"kind": "csv", "file": "site-a.csv"}
    with pytest.raises(SpecError, match="traces.renewable.a.file: file not found: site-a.csv"):
        scenario_from_dict(d, tmp_path / "scenario-folder")


def test_shipped_topologies_by_name(tmp_path):
    assert {"eu-5", "global-7", "us-100"} <= set(builtin_topologies())
    d = small_scenario_dict()
    del d["sites"], d["links"]
    d["topology"] = "eu-5"
    d["workloads"]["jobs"] = [{**j, "origin": "rome"} for j in d["workloads"]["jobs"]]
    sc = scenario_from_dict(d, tmp_path)
    assert [s.name for s in sc.sites] == ["rome", "milan", "vienna", "amsterdam", "madrid"]
    d["topology"] = "eu-6"
    with pytest.raises(SpecError) as e:
        scenario_from_dict(d, tmp_path)
    assert e.value.lines() == ["topology: file not found: eu-6 (did you mean eu-5?) (relative to the scenario "
                               "file; or a shipped topology by name: eu-5, global-7, us-100)"]


def test_a_topology_beside_the_scenario_beats_a_shipped_one_of_the_same_name(tmp_path):
    topo = {"name": "mine", "sites": small_scenario_dict()["sites"], "links": small_scenario_dict()["links"]}
    (tmp_path / "eu-5").write_text(yaml.safe_dump(topo))
    d = small_scenario_dict()
    del d["sites"], d["links"]
    d["topology"] = "eu-5"
    assert [s.name for s in scenario_from_dict(d, tmp_path).sites] == ["a", "b"]
