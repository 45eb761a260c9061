"""The PowerTrip claims over seeds: mean, 95 % CI, and 'reproduced' only with the paper's number in it."""

from __future__ import annotations

import json

import numpy as np

from testbed.analysis import federated_claims as fc
from testbed.analysis.validation import Run


def _runs(tmp_path, reductions, *, clock="straggler", reached=True):
    runs = []
    for seed, r in enumerate(reductions):
        d = tmp_path / f"{clock}-{seed}"
        d.mkdir()
        by = {"powertrip_h": 0.5 if reached else float("nan"), "max_reduction_pct": r + 6.0,
              "reduction_vs_best_static_pct": r, "reduction_vs_static_k70_pct": r - 3.0}
        (d / "comparison.json").write_text(json.dumps({"claims": {"by_model": {clock: by}}, "policies": {}}))
        runs.append(Run(path=d, substrate="sim", seed=seed, scenario="pt", cell="", params={},
                        resolved={"federated": {"aggregator": "agg"}}))
    return runs


def _with_comps(runs):
    return runs, [json.loads((r.path / "comparison.json").read_text()) for r in runs]


def _row(table, claim_start):
    return table[table["claim"].str.startswith(claim_start)].iloc[0]


def test_verdicts_over_ten_seeds(tmp_path):
    g = np.random.default_rng(0)
    t = fc.claims_table(*_with_comps(_runs(tmp_path, list(44.0 + g.normal(0, 3, 10)))))
    assert _row(t, "PowerTrip vs the best static k")["verdict"] == "reproduced"
    assert _row(t, "PowerTrip: up to 50 %")["verdict"] == "reproduced"
    (tmp_path / "w").mkdir()
    weaker = fc.claims_table(*_with_comps(_runs(tmp_path / "w", list(20.0 + g.normal(0, 2, 10)))))
    assert _row(weaker, "PowerTrip vs the best static k")["verdict"] == "same direction, weaker"
    (tmp_path / "i").mkdir()
    wide = fc.claims_table(*_with_comps(_runs(tmp_path / "i", list(20.0 + g.normal(0, 60, 10)))))
    assert _row(wide, "PowerTrip vs the best static k")["verdict"].startswith("inconclusive")
    (tmp_path / "n").mkdir()
    none = fc.claims_table(*_with_comps(_runs(tmp_path / "n", list(g.normal(0, 5, 10)))))
    assert _row(none, "PowerTrip vs the best static k")["verdict"].startswith("not reproduced")


def test_few_seeds_or_missed_targets_are_not_judged(tmp_path):
    t = fc.claims_table(*_with_comps(_runs(tmp_path, [44.0, 45.0, 43.0])))
    assert _row(t, "PowerTrip vs the best static k")["verdict"].startswith("not enough seeds (n=3<10")
    (tmp_path / "m").mkdir()
    missed = fc.claims_table(*_with_comps(_runs(tmp_path / "m", [float("nan")] * 10, reached=False)))
    row = _row(missed, "PowerTrip vs the best static k")
    assert row["PowerTrip reached target"] == 0 and row["verdict"].startswith("not enough seeds (n=0")


def test_migration_runs_are_not_federated(tmp_path):
    run = Run(path=tmp_path, substrate="sim", seed=0, scenario="m", cell="", params={}, resolved={"federated": None})
    assert not fc.is_federated(run) and fc.markdown([run], [None]) == []
