"""The alpha trade-off: the frontier over seeds, the choice within an overrun budget, and that choice
judged out of sample on another scenario."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml

from testbed.analysis import alpha_frontier as af
from testbed.cli import main
from tests.conftest import ROOT

ALPHA = "param_policies_fa_alpha"


def _sums(scenarios: dict[str, dict[float, tuple[float, float]]], seeds=(0, 1, 2)) -> pd.DataFrame:
    """Summaries of alpha sweeps: per scenario, alpha -> (grid kWh, overrun fraction) of policy ``fa``
    (seed s adds s kWh and, every other seed, half a percent of overruns), with a ``static`` row
    per run that does not depend on alpha. Runs are numbered in the order given."""
    rows, run = [], 0
    for scen, levels in scenarios.items():
        for alpha, (grid, over) in levels.items():
            for s in seeds:
                d = f"/r/{scen}/{alpha}/{s}"
                common = {"run": run, "run_dir": d, "substrate": "sim", "seed": s, "scenario": scen, ALPHA: alpha,
                          "param_feasibility_alpha": alpha}
                n = 200
                rate = over + (0.005 if s % 2 else -0.005 if over > 0 else 0.0)
                rows.append({**common, "label": "fa", "policy": "feasibility_aware", "grid_kwh": grid + s,
                             "migrations": n, "migrations_overran": round(rate * n)})
                rows.append({**common, "label": "static", "policy": "static", "grid_kwh": 2 * grid + s,
                             "migrations": 0, "migrations_overran": 0})
                run += 1
    return pd.DataFrame(rows)


# A: the least energy (alpha 0.05) overruns beyond the budget; 0.1 is the choice within it.
A = {0.05: (100.0, 0.10), 0.1: (102.0, 0.02), 0.2: (104.0, 0.01)}
# B: its own best is 0.05; 0.1 (chosen on A) costs 1 kWh more and still keeps the budget.
B = {0.05: (50.0, 0.01), 0.1: (51.0, 0.03), 0.2: (53.0, 0.0)}


def test_the_frontier_has_one_point_per_alpha_with_intervals_over_seeds():
    front = af.frontier(af.points(_sums({"A": A})))
    assert list(front["label"].unique()) == ["fa"]  # static decides without alpha: left out
    assert list(front["alpha"]) == [0.05, 0.1, 0.2] and (front["seeds"] == 3).all()
    row = front[front["alpha"] == 0.1].iloc[0]
    assert row["grid_kwh"] == pytest.approx(103.0)  # 102 + mean(0, 1, 2)
    assert row["grid_kwh_lo"] < 103.0 < row["grid_kwh_hi"]
    assert row["overrun_frac"] == pytest.approx((0.015 + 0.025 + 0.015) / 3)
    assert row["grid_vs_ref_kwh"] == pytest.approx(2.0) and row["ref_alpha"] == 0.05  # paired per seed
    per_seed = [100.0 * ((102.0 + s) / (204.0 + s) - 1.0) for s in (0, 1, 2)]  # vs static in the same run
    assert row["grid_vs_static_pct"] == pytest.approx(sum(per_seed) / 3)


def test_the_choice_is_the_least_energy_within_the_overrun_budget():
    front = af.frontier(af.points(_sums({"A": A})))
    chosen = af.choose(front)
    assert chosen["alpha"].item() == 0.1 and chosen["rule"].item() == af.WITHIN_BUDGET
    assert af.choose(front, budget_frac=0.2)["alpha"].item() == 0.05
    # no alpha keeps a 0.1 % budget: the least overruns (0.2), and the rule says so
    tight = af.choose(front, budget_frac=0.001)
    assert tight["alpha"].item() == 0.2 and tight["rule"].item() == af.OVER_BUDGET


def test_alpha_chosen_on_a_is_reported_on_b_beside_b_s_own_best(tmp_path):
    p = af.points(_sums({"A": A, "B": B}))
    oos = af.out_of_sample(p)
    assert len(oos) == 1
    row = oos.iloc[0]
    assert (row["chosen_on"], row["judged_on"], row["policy"]) == ("A", "B", "fa")
    assert row["chosen_alpha"] == 0.1 and row["own_best_alpha"] == 0.05
    assert row["chosen_by"] == af.WITHIN_BUDGET == row["own_best_by"]
    assert row["grid_kwh"].startswith("52 [")  # B at 0.1: 51 + mean seed 1
    assert row["within_budget"] == True  # noqa: E712 (a numpy bool)
    assert row["regret_kwh"].startswith("1 ")  # paired per seed: exactly 1 kWh each (no spread)
    text = "\n".join(af.markdown(_sums({"A": A, "B": B}), None, tmp_path))
    assert "**Out of sample**" in text and "cannot be validated" not in text
    assert (tmp_path / "alpha_frontier.png").stat().st_size > 10_000


def test_the_scenario_given_first_is_the_one_chosen_on():
    oos = af.out_of_sample(af.points(_sums({"B": B, "A": A})))
    row = oos.iloc[0]
    assert (row["chosen_on"], row["judged_on"]) == ("B", "A")
    assert row["chosen_alpha"] == 0.05 and row["within_budget"] == False  # noqa: E712 (0.05 overruns 10 % on A)
    assert row["own_best_alpha"] == 0.1


def test_a_single_swept_scenario_says_the_choice_is_not_validated():
    text = "\n".join(af.markdown(_sums({"A": A}), None))
    assert "## The alpha trade-off" in text
    assert "cannot be validated out of sample" in text and af.HOLDOUT_SWEEP in text


def test_nothing_when_no_input_sweeps_alpha():
    sums = _sums({"A": {0.1: (100.0, 0.0)}})
    assert af.alpha_params(sums) == []
    assert af.markdown(sums, None) == []


def test_a_policy_is_steered_when_its_resolved_entry_takes_alpha():
    """A policy that inherits the scenario model's alpha (no param column of its own) is on the frontier;
    one whose entry takes no alpha is not, whatever the reference model's alpha."""
    class Run:
        def __init__(self, path, alpha):
            self.path, self.scenario = path, "S"
            self.resolved = {"policies": [{"name": "static", "label": None},
                                          {"name": "feasibility_aware", "label": None, "alpha": alpha}]}

    rows, runs = [], []
    for i, alpha in enumerate((0.05, 0.2)):
        runs.append(Run(f"/r/{i}", alpha))
        for label in ("static", "feasibility_aware"):
            rows.append({"run": i, "run_dir": f"/r/{i}", "substrate": "sim", "seed": 0, "label": label,
                         "param_feasibility_alpha": alpha, "grid_kwh": 10.0, "migrations": 4,
                         "migrations_overran": 1})
    p = af.points(pd.DataFrame(rows), runs)
    assert set(p["label"]) == {"feasibility_aware"} and set(p["scenario"]) == {"S"}


def test_the_holdout_sweep_sweeps_the_same_alphas_on_another_scenario_with_ten_seeds(capsys):
    ref = yaml.safe_load((ROOT / "sweeps" / "validate-alpha.yaml").read_text())
    hold = yaml.safe_load((ROOT / "sweeps" / "validate-alpha-holdout.yaml").read_text())
    assert len(hold["seeds"]) == 10 and hold["substrate"] == "sim"
    assert hold["scenario"] != ref["scenario"]
    assert list(hold["grid"].values()) == list(ref["grid"].values())
    key = next(iter(hold["grid"]))
    assert "feasibility.alpha" in key and "policies[feasibility_aware].alpha" in key
    scenario = yaml.safe_load((ROOT / "sweeps" / hold["scenario"]).read_text())
    assert any((p if isinstance(p, str) else p["name"]) == "feasibility_aware" for p in scenario["policies"])
    assert main(["sweep", str(ROOT / "sweeps" / "validate-alpha-holdout.yaml"), "--dry-run"]) == 0
    assert "30 trials" in capsys.readouterr().out


def test_report_over_an_alpha_sweep_writes_the_frontier(tmp_path):
    sweep = {"name": "a", "scenario": str(ROOT / "scenarios" / "sweep-small.yaml"), "seeds": [0, 1],
             "grid": {"feasibility.alpha, policies[feasibility_aware].alpha": [0.05, 0.2]}}
    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump(sweep))
    assert main(["sweep", str(f), "--out", str(tmp_path / "sw"), "--parallel", "2"]) == 0
    assert main(["report", str(tmp_path / "sw"), "--out", str(tmp_path / "rep")]) == 0
    text = (tmp_path / "rep" / "report.md").read_text()
    assert "## The alpha trade-off" in text
    assert "| sweep-small | sim | feasibility_aware | 0.05 | 2 |" in text
    assert "cannot be validated out of sample" in text
    assert (tmp_path / "rep" / "alpha_frontier.png").stat().st_size > 10_000


def test_runs_of_an_input_that_does_not_sweep_alpha_stay_off_the_frontier():
    import pandas as pd

    from testbed.analysis.alpha_frontier import points

    rows = []
    for seed in (1, 2):
        for alpha, kwh in ((0.05, 100.0), (0.1, 99.0)):
            rows.append({"run": len(rows), "run_dir": f"a{seed}{alpha}", "label": "fa", "policy": "feasibility_aware",
                         "seed": seed, "substrate": "sim", "scenario": "s", "param_feasibility_alpha": alpha,
                         "param_policies_fa_alpha": alpha, "grid_kwh": kwh, "migrations": 10, "migrations_overran": 1})
        # another sweep of the same scenario (a degradation level), its alpha fixed at 0.1: not a frontier point
        rows.append({"run": len(rows), "run_dir": f"d{seed}", "label": "fa", "policy": "feasibility_aware",
                     "seed": seed, "substrate": "sim", "scenario": "s", "param_feasibility_alpha": None,
                     "param_policies_fa_alpha": None, "param_deg": 50, "grid_kwh": -1000.0, "migrations": 10, "migrations_overran": 9})
    from types import SimpleNamespace

    runs = [SimpleNamespace(path=r["run_dir"], scenario="s", resolved={"policies": [
        {"name": "feasibility_aware", "label": "fa",
         "alpha": r["param_policies_fa_alpha"] if r["param_policies_fa_alpha"] is not None else 0.1}]})
        for r in rows]
    p = points(pd.DataFrame(rows), runs)
    assert len(p) == 4 and (p["grid_kwh"] > 0).all()
