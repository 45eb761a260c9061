"""One prediction object, a typed candidate, one alpha, and a policy-facing API that imports no policy."""

from __future__ import annotations

import ast
import dataclasses

import pytest

from testbed.controller.policy_api import Candidate, DecisionRecord
from testbed.controller.records import MIGRATION_COLUMNS, prediction_columns
from testbed.controller.run_log import RunLog
from testbed.feasibility import FeasibilityParams, assess
from testbed.spec import scenario_from_dict
from tests.conftest import ROOT, run_policies, small_scenario_dict

WINDOW_2H30_S = 2.5 * 3600


def test_a_prediction_holds_the_nominal_and_the_risk_verdict_side_by_side():
    # 100 GB over 1 Gbit/s: 810.7 s fits the nominal 900 s budget, not the 10 %-risk window's
    p = assess(100, 1, WINDOW_2H30_S, epsilon=0.1, window_noise_frac=0.3)
    assert p.nominal_feasible is True and p.nominal_budget_s == pytest.approx(900)
    assert p.nominal_margin_s == pytest.approx(89.3)
    assert p.risk_feasible is False and p.risk_budget_s < 810.7 and p.risk_margin_s < 0
    assert p.risk_total_s == p.total_s  # no bandwidth noise: the risk verdict uses the point total
    assert p.nominal_class == "B" and p.risk_class == "C"
    # the rule the prediction was made under decides
    assert p.feasible is False and p.budget_s == p.risk_budget_s and p.feasibility_class == "C"


def test_without_a_risk_budget_the_risk_fields_are_empty_and_the_nominal_rule_decides():
    p = assess(100, 1, WINDOW_2H30_S)
    assert (p.risk_feasible, p.risk_budget_s, p.risk_total_s, p.risk_class, p.p_window_ok) == (None,) * 5
    assert p.feasible is p.nominal_feasible is True
    assert p.budget_s == p.nominal_budget_s and p.margin_s == p.nominal_margin_s


def test_a_prediction_is_immutable():
    p = assess(40, 10, WINDOW_2H30_S)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.total_s = 0.0  # type: ignore[misc]


def test_migration_columns_keep_the_nominal_verdict_and_the_risk_verdict_apart():
    p = assess(100, 1, WINDOW_2H30_S, FeasibilityParams(alpha=0.1), epsilon=0.1, window_noise_frac=0.3)
    cols = prediction_columns(p)
    assert cols["predicted_feasible"] is True and cols["predicted_risk_feasible"] is False
    assert cols["predicted_budget_s"] == pytest.approx(900) and cols["predicted_feasibility_class"] == "B"
    assert cols["p_window_ok"] == p.p_window_ok and cols["predicted_alpha"] == 0.1
    assert cols["predicted_corrections"] == ""
    assert set(cols) <= set(MIGRATION_COLUMNS)


def test_a_candidate_row_shows_the_nominal_terms_rounded_and_the_scores():
    p = assess(100, 1.23456789, 3333.33333, epsilon=0.2, window_noise_frac=0.5)
    c = Candidate("b", p, eq1_ok=p.feasible, eq2_ok=True, scores=(("R", 0.5), ("U", -1.25)))
    row = c.row()
    assert row == {"dst": "b", "bandwidth_gbps": 1.234568, "window_s": 3333.333, "total_s": round(p.total_s, 3),
                   "budget_s": round(p.nominal_budget_s, 3), "eq1_ok": p.feasible, "eq2_ok": True,
                   "class": p.nominal_class, "R": 0.5, "U": -1.25}
    assert c.score("U") == -1.25 and c.passes_filter is p.feasible
    with pytest.raises(KeyError, match="no score 'L_h'"):
        c.score("L_h")
    assert Candidate("c", scores=(("surplus_kw", 1.5),)).row() == {"dst": "c", "surplus_kw": 1.5}


def test_a_decision_record_writes_its_candidates_to_their_own_tables_keyed_by_decision():
    rec = DecisionRecord(0.0, "p", "stay", "j1", "a", None, "why", 1, 0, (Candidate("c", scores=(("x", 1.0),)),))
    row = rec.row()
    assert list(row) == [f.name for f in dataclasses.fields(DecisionRecord) if f.name != "candidates"]
    log = RunLog("p")
    log.decision(rec)
    log.decision(rec)
    t = log.tables()
    assert list(t["decisions"]["decision"]) == [0, 1]
    cands = t["candidates"]
    assert list(cands["decision"]) == [0, 1] and list(cands["dst"]) == ["c", "c"] and not cands["chosen"].any()
    assert str(cands["eq1_ok"].dtype) == "boolean" and cands["bandwidth_gbps"].isna().all()
    scores = t["candidate_scores"]
    assert scores[["decision", "dst", "score", "value"]].values.tolist() == [[0, "c", "x", 1.0], [1, "c", "x", 1.0]]


def test_a_policy_predicts_with_the_scenarios_alpha_unless_it_sets_its_own():
    d = small_scenario_dict(duration_h=72, policies=[
        {"name": "feasibility_aware"}, {"name": "no_filter", "label": "own", "alpha": 0.3}])
    d["workloads"] = {"arrivals": {"jobs_per_day": 10, "until_h": 24},
                      "mix": [{"family": "m", "checkpoint_gb": 30, "work_gpu_h": [4, 12]}]}
    d["feasibility"] = {"alpha": 0.2}
    sc = scenario_from_dict(d)
    assert [p.alpha for p in sc.policies] == [0.2, 0.3]  # the resolved scenario shows what each predicts with
    tables = run_policies(sc)
    own = tables["own"]["migrations"]
    assert len(own) > 0 and set(own["predicted_alpha"]) == {0.3}
    fa = tables["feasibility_aware"]
    cands = fa["candidates"].dropna(subset=["budget_s"])
    assert len(cands) and all(c.budget_s == pytest.approx(round(0.2 * c.window_s, 3), abs=2e-3)
                              for c in cands.itertuples())


def test_the_policy_facing_api_imports_nothing_of_the_policies():
    tree = ast.parse((ROOT / "testbed" / "controller" / "policy_api.py").read_text())
    imported = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    imported += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert imported and not [m for m in imported if m == "testbed.policies" or m.startswith("testbed.policies.")]


def test_parameters_from_a_scenario_model_turn_correction_names_into_corrections():
    from testbed.feasibility import TCP_EFFICIENCY_MTU1500, Corrections
    from testbed.spec.policies import FeasibilityModel

    plain = FeasibilityParams.from_model(FeasibilityModel(), rtt_ms=20.0, p_sys_kw=1.8, p_node_kw=0.75)
    assert plain == FeasibilityParams(p_sys_kw=1.8, p_node_kw=0.75)
    model = FeasibilityModel(alpha=0.2, t_load_s=5, corrections=["slow_start", "protocol_efficiency"])
    p = FeasibilityParams.from_model(model, rtt_ms=20.0, p_sys_kw=3.0, p_node_kw=1.0)
    assert (p.alpha, p.t_load_s, p.p_sys_kw, p.p_node_kw) == (0.2, 5, 3.0, 1.0)
    assert p.corrections == Corrections(protocol_efficiency=TCP_EFFICIENCY_MTU1500, rtt_ms=20.0)
