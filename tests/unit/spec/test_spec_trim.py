"""A shorter ``duration_h`` (``--set``, Python overrides, a sweep's grid) drops the bandwidth events
and listed jobs that would begin after the run, with one warning line, instead of failing."""

from __future__ import annotations

import copy
import json

import pytest
import yaml

import testbed
from testbed.cli import main
from testbed.errors import SpecError, TestbedWarning
from testbed.spec import scenario_from_dict
from testbed.spec.trim import trim_to_run
from testbed.sweep import load_sweep_file, plan_sweep
from tests.conftest import ROOT, small_scenario_dict

QUICKSTART = ROOT / "scenarios" / "quickstart.yaml"  # a bandwidth event at 12 h


def _with_late_entries() -> dict:
    d = small_scenario_dict(duration_h=24)
    d["traces"]["bandwidth"] = {"events": [{"link": "a-b", "start_h": 2, "duration_h": 4, "degradation_pct": 50},
                                           {"link": "a-b", "start_h": 12, "duration_h": 4, "degradation_pct": 50}]}
    d["workloads"]["jobs"].append({"id": "late", "checkpoint_gb": 10, "work_gpu_h": 1, "arrival_h": 20, "origin": "a"})
    return d


def test_trim_to_run_drops_what_begins_at_or_after_the_end_and_leaves_the_input_alone():
    d = _with_late_entries()
    d["duration_h"] = 12
    before = copy.deepcopy(d)
    out, note = trim_to_run(d)
    assert d == before  # a copy is trimmed
    assert [e["start_h"] for e in out["traces"]["bandwidth"]["events"]] == [2]
    assert [j["id"] for j in out["workloads"]["jobs"]] == ["j1", "j2"]
    assert note == ("duration_h 12: dropped 1 bandwidth event (traces.bandwidth.events) and 1 job (workloads.jobs) "
                    "beginning at or after the end of the run")
    assert trim_to_run(small_scenario_dict()) == (small_scenario_dict(), None)  # nothing to drop: no note


def test_jobs_are_kept_when_dropping_them_would_leave_no_job():
    d = small_scenario_dict(duration_h=0.5)
    d["workloads"]["jobs"] = [{"id": "j", "checkpoint_gb": 10, "work_gpu_h": 1, "arrival_h": 1, "origin": "a"}]
    out, note = trim_to_run(d)
    assert note is None and out["workloads"]["jobs"] == d["workloads"]["jobs"]
    with pytest.raises(SpecError, match=r"workloads.jobs\[0\].arrival_h: arrives after the run ends"):
        scenario_from_dict(d)


def test_a_python_override_warns_once_and_validates():
    with pytest.warns(TestbedWarning, match="duration_h 12: dropped 1 bandwidth event") as caught:
        sc = testbed.load(QUICKSTART, overrides={"duration_h": 12})
    assert len([w for w in caught if issubclass(w.category, TestbedWarning)]) == 1
    assert sc.duration_h == 12 and sc.traces.bandwidth.events == []


def test_the_documented_cli_example_runs_with_one_warning_line(tmp_path, capsys):
    assert main(["run", "--help"]) == 0
    assert "--set duration_h=12" in " ".join(capsys.readouterr().out.split())  # the example documented there
    out = tmp_path / "r"
    assert main(["run", str(QUICKSTART), "--set", "duration_h=12", "--out", str(out), "--no-progress",
                 "--no-plots"]) == 0
    err = capsys.readouterr().err.splitlines()
    warnings = [line for line in err if line.startswith("warning:")]
    assert warnings == ["warning: duration_h 12: dropped 1 bandwidth event (traces.bandwidth.events) "
                        "beginning at or after the end of the run"]
    assert not any(line.startswith("error:") for line in err)
    resolved = json.loads((out / "manifest.json").read_text())["scenario"]["resolved"]
    assert resolved["duration_h"] == 12 and resolved["traces"]["bandwidth"]["events"] == []
    saved = testbed.load(out / "scenario.yaml")  # the scenario saved with the results is the one that ran
    assert saved.duration_h == 12 and saved.traces.bandwidth.events == []


def test_a_sweep_over_duration_drops_per_cell_in_one_line(tmp_path):
    d = _with_late_entries()
    (tmp_path / "scenario.yaml").write_text(yaml.safe_dump(d, sort_keys=False))
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text("scenario: scenario.yaml\nseeds: [1]\ngrid:\n  duration_h: [10, 11, 24]\n")
    with pytest.warns(TestbedWarning) as caught:
        plan = plan_sweep(load_sweep_file(sweep))
    lines = [str(w.message) for w in caught if issubclass(w.category, TestbedWarning)]
    assert lines == [f"{sweep}: cell 000-duration_h=10: duration_h 10: dropped 1 bandwidth event "
                     "(traces.bandwidth.events) and 1 job (workloads.jobs) beginning at or after the end of the run",
                     f"{sweep}: cell 001-duration_h=11: duration_h 11: dropped 1 bandwidth event "
                     "(traces.bandwidth.events) and 1 job (workloads.jobs) beginning at or after the end of the run"]
    first = plan.cells[0]
    assert len(first.loaded.scenario.traces.bandwidth.events) == 1
    assert "start_h: 12" not in first.loaded.text  # the cell's saved scenario is the one that runs
    assert len(plan.cells[2].loaded.scenario.workloads.jobs) == 3


def test_a_file_as_written_is_not_trimmed(tmp_path):
    from testbed.spec import load_scenario

    d = _with_late_entries()
    d["duration_h"] = 12
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(d))
    with pytest.raises(SpecError) as e:
        load_scenario(path)
    assert [w for w, _ in e.value.problems] == ["traces.bandwidth.events[1].start_h", "workloads.jobs[2].arrival_h"]
