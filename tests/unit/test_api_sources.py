"""testbed.load / run take a scenario as a path, a dict (what a scenario file holds; relative paths
resolve from ``base=`` or the current directory) or a Scenario; testbed.open reads a run."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

import pytest
import yaml

import testbed
from testbed.errors import SpecError

REPO = Path(__file__).resolve().parents[2]
SMALL = REPO / "scenarios" / "sweep-small.yaml"
CARBON = REPO / "scenarios" / "carbon-price.yaml"


def _small(**changes) -> dict:
    d = yaml.safe_load(SMALL.read_text())
    d.update(duration_h=12, policies=["static", "feasibility_aware"], **changes)
    d["workloads"]["arrivals"]["until_h"] = 10
    return d


def test_a_dict_loads_as_the_file_does():
    data = yaml.safe_load(SMALL.read_text())
    kept = copy.deepcopy(data)
    assert testbed.load(data) == testbed.load(SMALL)
    assert data == kept  # the caller's dict is left as it was
    sc = testbed.load(data, overrides={"policies[feasibility_aware].alpha": 0.3})
    assert next(p for p in sc.policies if p.name == "feasibility_aware").alpha == 0.3


def test_a_dicts_own_errors_name_its_fields_then_the_overrides():
    with pytest.raises(SpecError) as e:
        testbed.load({**yaml.safe_load(SMALL.read_text()), "duration_h": -1})
    assert [w for w, _ in e.value.problems] == ["duration_h"]
    with pytest.raises(SpecError) as e:
        testbed.load(yaml.safe_load(SMALL.read_text()), overrides={"duraton_h": 12})
    assert e.value.problems == [("overrides duraton_h", "unknown field (did you mean duration_h?)")]
    with pytest.raises(TypeError, match="a scenario file path, a dict or a testbed Scenario, got int"):
        testbed.load(42)


def test_relative_paths_in_a_dict_resolve_from_base_or_the_current_directory(tmp_path, monkeypatch):
    (tmp_path / "data").mkdir()
    shutil.copy(REPO / "scenarios" / "data" / "carbon-paris-48h.csv", tmp_path / "data" / "mine.csv")
    data = yaml.safe_load(CARBON.read_text())
    data["traces"]["carbon"]["sites"]["paris"]["file"] = "data/mine.csv"
    elsewhere = tmp_path / "else" / "where"  # not beside the data, nor one level below it
    elsewhere.mkdir(parents=True)
    monkeypatch.chdir(elsewhere)
    with pytest.raises(SpecError) as e:
        testbed.load(data)
    assert [w for w, _ in e.value.problems] == ["traces.carbon.sites.paris.file"]
    want = (tmp_path / "data" / "mine.csv").resolve()
    assert Path(testbed.load(data, base=tmp_path).traces.carbon.sites["paris"].file) == want
    monkeypatch.chdir(tmp_path)
    assert Path(testbed.load(data).traces.carbon.sites["paris"].file) == want


def test_run_takes_a_dict_and_records_a_scenario_that_reloads_anywhere(tmp_path, monkeypatch):
    data = _small()
    res = testbed.run(data, out=tmp_path / "r", plots=False, progress=False)
    assert res.labels == ["static", "feasibility_aware"] and len(res.summary) == 2
    monkeypatch.chdir(tmp_path)
    again = testbed.load(res.path / "scenario.yaml")
    assert again == testbed.load(data)
    assert "built in Python" in (res.path / "scenario.yaml").read_text()


def test_run_takes_a_scenario_built_from_a_dict_and_edited(tmp_path):
    sc = testbed.load(_small())
    edited = testbed.load(sc, {"policies": ["feasibility_aware"]})
    res = testbed.run(edited, out=tmp_path / "r", plots=False, progress=False, seed=2)
    assert res.labels == ["feasibility_aware"] and res.manifest["seed"] == 2
    assert testbed.open(res.path).labels == ["feasibility_aware"]  # a run directory opens as Results
    assert type(testbed.open(res.path)) is type(res)
    with pytest.raises(SpecError, match="not a testbed results directory"):
        testbed.open(tmp_path)
