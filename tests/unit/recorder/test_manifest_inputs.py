"""The run manifest records every input file a scenario reads: path relative to the scenario, sha256."""

from __future__ import annotations

import hashlib
import shutil

import yaml

from testbed.recorder.manifest import build_manifest, input_files
from testbed.spec.load import load_scenario
from tests.conftest import ROOT, small_scenario_dict


def make_case(tmp_path):
    """scenario in tmp/s/, topology in tmp/topo/, traces in tmp/s/data/, a power profile beside the scenario."""
    (tmp_path / "s" / "data").mkdir(parents=True)
    (tmp_path / "topo").mkdir()
    shutil.copy(ROOT / "traces" / "samples" / "caiso-curtailments-sample.csv", tmp_path / "s" / "data" / "caiso.csv")
    shutil.copy(ROOT / "traces" / "samples" / "google-power-sample.csv", tmp_path / "s" / "data" / "google.csv")
    shutil.copy(ROOT / "testbed" / "power" / "profiles" / "rtx4090.yaml", tmp_path / "s" / "my-profile.yaml")
    d = small_scenario_dict(start="2024-04-20T00:00:00-07:00", duration_h=12)
    topo = {"name": "t", "sites": d.pop("sites"), "links": d.pop("links")}
    topo["sites"][1]["node_type"] = "my-gpu"
    (tmp_path / "topo" / "two.yaml").write_text(yaml.safe_dump(topo))
    d["topology"] = "../topo/two.yaml"
    d["node_types"] = {"my-gpu": {"p_active_kw": 0.75, "p_idle_kw": 0.08, "speed": 1.0, "power_profile": "my-profile.yaml"}}
    d["traces"]["renewable"] = {
        "a": {"kind": "caiso", "file": "data/caiso.csv", "scale_to_kw": 2.0},
        "b": {"kind": "google", "file": "data/google.csv", "pdu": "pdu6", "capacity_kw": 3.0},
    }
    (tmp_path / "s" / "data" / "xt.csv").write_text("t_s,flows\n0,1\n3600,2\n")
    d["cross_traffic"] = [{"src": "a", "dst": "b", "tcp": {"flows": 1}},
                          {"src": "b", "dst": "a", "trace": "data/xt.csv"}]
    path = tmp_path / "s" / "scenario.yaml"
    path.write_text(yaml.safe_dump(d))
    return path


def sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_every_input_file_is_hashed_with_its_path_relative_to_the_scenario(tmp_path):
    path = make_case(tmp_path)
    loaded = load_scenario(path)
    resolved = loaded.scenario.model_dump(mode="json")
    manifest = build_manifest(scenario_sha256=loaded.sha256, scenario_path=str(loaded.path), scenario_resolved=resolved,
                              seed=1, substrate={}, policies=[], wall_s={}, argv=[], topology_path=loaded.topology_path)
    entries = {e["field"]: e for e in manifest["input_files"]}
    expected = {
        "topology": ("../topo/two.yaml", tmp_path / "topo" / "two.yaml"),
        "traces.renewable.a.file": ("data/caiso.csv", tmp_path / "s" / "data" / "caiso.csv"),
        "traces.renewable.b.file": ("data/google.csv", tmp_path / "s" / "data" / "google.csv"),
        "node_types.my-gpu.power_profile": ("my-profile.yaml", tmp_path / "s" / "my-profile.yaml"),
        "cross_traffic[1].trace": ("data/xt.csv", tmp_path / "s" / "data" / "xt.csv"),
    }
    assert set(entries) == set(expected)
    assert loaded.topology_path == (tmp_path / "topo" / "two.yaml").resolve()
    for field, (rel, real) in expected.items():
        assert entries[field]["path"] == rel
        assert entries[field]["sha256"] == sha(real)
        assert entries[field]["bytes"] == real.stat().st_size


def test_the_hash_changes_with_the_file_and_a_vanished_file_is_reported(tmp_path):
    path = make_case(tmp_path)
    resolved = load_scenario(path).scenario.model_dump(mode="json")
    before = {e["field"]: e["sha256"] for e in input_files(path, resolved)}
    trace = tmp_path / "s" / "data" / "caiso.csv"
    trace.write_text(trace.read_text() + "\n")
    after = {e["field"]: e["sha256"] for e in input_files(path, resolved)}
    assert after["traces.renewable.a.file"] != before["traces.renewable.a.file"]
    assert after["traces.renewable.b.file"] == before["traces.renewable.b.file"]
    xt = tmp_path / "s" / "data" / "xt.csv"
    xt.write_text("t_s,flows\n0,3\n")
    assert {e["field"]: e["sha256"] for e in input_files(path, resolved)}["cross_traffic[1].trace"] != \
        before["cross_traffic[1].trace"]
    trace.unlink()
    gone = {e["field"]: e for e in input_files(path, resolved)}["traces.renewable.a.file"]
    assert gone["sha256"] is None and "cannot be read" in gone["problem"]


def test_a_scenario_without_input_files_records_none(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(small_scenario_dict()))
    assert input_files(path, load_scenario(path).scenario.model_dump(mode="json")) == []


def test_the_working_directory_at_write_time_does_not_matter(tmp_path, monkeypatch):
    path = make_case(tmp_path)
    loaded = load_scenario(path)
    resolved = loaded.scenario.model_dump(mode="json")
    here = input_files(path, resolved, loaded.topology_path)
    (tmp_path / "elsewhere" / "topo").mkdir(parents=True)  # a decoy ../topo/two.yaml from another cwd
    (tmp_path / "elsewhere" / "topo" / "two.yaml").write_text("decoy\n")
    monkeypatch.chdir(tmp_path / "elsewhere" / "topo")
    assert input_files(path, resolved, loaded.topology_path) == here
