from __future__ import annotations

import numpy as np

from testbed.spec import scenario_from_dict
from testbed.workload import generate_jobs
from tests.conftest import small_scenario_dict


def _arrivals(seed: int, per_day: float = 12, days: float = 10) -> dict:
    d = small_scenario_dict(seed=seed, duration_h=24 * days)
    d["workloads"] = {"arrivals": {"jobs_per_day": per_day},
                      "mix": [{"family": "x", "checkpoint_gb": [10, 20], "work_gpu_h": 5, "weight": 3},
                              {"family": "y", "checkpoint_gb": 100, "work_gpu_h": [1, 2], "weight": 1}]}
    return d


def test_explicit_jobs_keep_their_fields():
    jobs = generate_jobs(scenario_from_dict(small_scenario_dict()))
    assert [(j.id, j.origin, j.arrival_s) for j in jobs] == [("j1", "a", 0.0), ("j2", "b", 3600.0)]


def test_poisson_arrivals_reproducible_and_calibrated():
    a = generate_jobs(scenario_from_dict(_arrivals(3)))
    b = generate_jobs(scenario_from_dict(_arrivals(3)))
    c = generate_jobs(scenario_from_dict(_arrivals(4)))
    assert a == b and a != c
    counts = [len(generate_jobs(scenario_from_dict(_arrivals(s)))) for s in range(40)]
    assert abs(np.mean(counts) - 120) < 8  # 12/day x 10 days
    fams = [j.family for s in range(10) for j in generate_jobs(scenario_from_dict(_arrivals(s)))]
    assert 0.68 < fams.count("x") / len(fams) < 0.82  # weight 3:1
    for j in a:
        assert (10 <= j.checkpoint_gb <= 20 and j.work_gpu_h == 5) or (j.checkpoint_gb == 100 and 1 <= j.work_gpu_h <= 2)
        assert j.arrival_s < 10 * 86400 and j.origin in ("a", "b")
