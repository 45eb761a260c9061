"""A migration that cannot finish before the bandwidth trace ends (a 1e9 GB checkpoint) is not an
internal error: it stays in flight and is recorded ``unfinished`` at the end of the run."""

from __future__ import annotations

import pytest

from testbed.errors import SpecError
from testbed.spec import scenario_from_dict
from tests.conftest import run_policies, small_scenario_dict


def _huge_checkpoints(size_gb: float) -> dict:
    d = small_scenario_dict()
    d["sites"][0]["lon_deg"] = -120.0  # windows far apart: energy_only wants to move
    d["workloads"]["jobs"] = [{"id": f"j{i}", "checkpoint_gb": size_gb, "work_gpu_h": 20, "arrival_h": i, "origin": "a"}
                              for i in range(3)]
    d["policies"] = ["static", "energy_only", "feasibility_aware"]
    return d


def test_a_1e9_gb_migration_is_recorded_unfinished():
    out = run_policies(scenario_from_dict(_huge_checkpoints(1e9)))
    moved = out["energy_only"]["migrations"]
    assert len(moved) >= 1
    assert set(moved["status"]) == {"unfinished"}
    jobs = out["energy_only"]["jobs"]
    assert not set(jobs.loc[jobs["status"] == "completed", "job_id"]) & set(moved["job_id"])
    # the feasibility filter never starts such a move
    assert len(out["feasibility_aware"]["migrations"]) == 0


def test_checkpoint_sizes_past_the_arithmetic_bound_are_refused():
    with pytest.raises(SpecError) as e:
        scenario_from_dict(_huge_checkpoints(1e300))
    assert e.value.problems[0][0] == "workloads.jobs[0].checkpoint_gb"
