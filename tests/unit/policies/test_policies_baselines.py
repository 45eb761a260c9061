"""The two baselines that isolate one effect of a migrating policy:

- ``placement_only`` places each job where ``feasibility_aware`` does and never migrates, so that
  ``placement_only`` vs ``static`` is placement alone and ``feasibility_aware`` vs ``placement_only``
  is migration alone;
- ``feasibility_aware_paper`` is ``feasibility_aware`` undamped (the paper's Algorithm 1):
  ``min_dwell_h`` and ``return_margin`` fixed at 0, refused if set.
"""

from __future__ import annotations

import dataclasses
import json

import pandas as pd
import pytest
import yaml

from testbed.cli import main
from testbed.controller.controller import Controller
from testbed.errors import SpecError
from testbed.inputs import build_inputs
from testbed.policies import make_policy
from testbed.policies.feasibility_aware import FeasibilityAwarePolicy
from testbed.spec import scenario_from_dict
from testbed.spec.policies import Damping
from testbed.substrate.sim import SimSubstrate
from testbed.traces.forecast import WindowForecaster
from tests.conftest import ROOT, run_policies, small_scenario_dict
from tests.unit.policies.policy_support import trace_kw
from tests.unit.policies.test_policies_dwell import _alternating, _gaps_h

QUICKSTART = ROOT / "scenarios" / "quickstart.yaml"
RUN_COLUMNS = ("policy", "label")  # the only columns that name the policy rather than what it did


def _quickstart(policies: list) -> dict[str, dict[str, pd.DataFrame]]:
    """The quick start (3 sites, 48 h, Poisson arrivals, seed 10) on sim, with these policies."""
    d = yaml.safe_load(QUICKSTART.read_text())
    d["policies"] = policies
    return run_policies(scenario_from_dict(d, QUICKSTART.parent))


def _sim(policies: list, traces: dict, jobs: list[dict], bandwidth_gbps: float = 10.0) -> dict[str, dict[str, pd.DataFrame]]:
    """Sites a and b (2 nodes each, one link), the given renewable ``traces`` and ``jobs``, 24 h on
    sim: the tables per policy label."""
    d = small_scenario_dict(duration_h=24, policies=policies)
    d["links"][0]["bandwidth_gbps"] = bandwidth_gbps
    d["workloads"] = {"jobs": jobs}
    sc = scenario_from_dict(d)
    inputs = dataclasses.replace(build_inputs(sc), renewable_kw=traces,
                                 windows=WindowForecaster(traces, {s: sc.node_type_of(s).p_active_kw for s in traces}))
    out = {}
    for spec in sc.policies:
        with SimSubstrate(inputs) as sub:
            out[spec.label or spec.name] = Controller(inputs, make_policy(spec, sc), sub).run().tables()
    return out


def _alternating_run(policy: dict, bandwidth_gbps: float = 10.0) -> dict[str, pd.DataFrame]:
    """One 20 GPU-h job (40 GB) between sites a and b whose equal 1-hour windows alternate, so that
    every window asks for a move (the damping scenario of test_policies_dwell)."""
    traces = {"a": _alternating("a", True), "b": _alternating("b", False)}
    job = {"id": "j", "checkpoint_gb": 40, "work_gpu_h": 20, "arrival_h": 0, "origin": "a"}
    [tables] = _sim([policy], traces, [job], bandwidth_gbps).values()
    return tables


def _initial_sites(tables: dict[str, pd.DataFrame]) -> pd.Series:
    """The site each job started at, from the jobs table: its final site, or the source of its
    first migration if it moved."""
    jobs = tables["jobs"].set_index("job_id")["final_site"].copy()
    m = tables["migrations"].sort_values("t_decision_s").drop_duplicates("job_id")
    jobs.loc[m["job_id"].to_numpy()] = m["src"].to_numpy()
    return jobs.sort_index()


def _placed(tables: dict[str, pd.DataFrame]) -> pd.Series:
    d = tables["decisions"]
    return d[d["kind"] == "place"].set_index("job_id")["dst"].sort_index()


def _what_it_did(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop(columns=[c for c in RUN_COLUMNS if c in df.columns]).reset_index(drop=True)


# -- placement_only ---------------------------------------------------------------------------------

def test_placement_only_places_each_job_where_feasibility_aware_does_and_never_moves():
    t = _quickstart(["static", "feasibility_aware", "placement_only"])
    po, fa = t["placement_only"], t["feasibility_aware"]
    assert len(fa["migrations"]) > 0  # the policy it is compared with does migrate here
    assert len(po["migrations"]) == 0 and (po["jobs"]["migrations"] == 0).all()
    assert not (po["decisions"]["kind"] == "migrate").any()
    sites = _initial_sites(po)
    assert len(sites) == 10
    pd.testing.assert_series_equal(sites, _initial_sites(fa))
    pd.testing.assert_series_equal(sites, _placed(po), check_names=False)  # it starts where it was placed
    assert (sites != _initial_sites(t["static"])).any()  # here placement is not the origin's


def test_placement_only_follows_feasibility_aware_where_energy_only_places_elsewhere():
    # a: 4 kW for the first hour only, b: 2 kW all day. The largest surplus is a's (energy_only's
    # placement); the longest window is b's (feasibility_aware's: R(d) is 1 at both)
    traces = {"a": trace_kw("a", [(0, 4.0), (1, 0.0)]), "b": trace_kw("b", [(0, 2.0)])}
    jobs = [{"id": f"j{k}", "checkpoint_gb": 24, "work_gpu_h": 4, "arrival_h": 0, "origin": "a"} for k in (1, 2)]
    t = _sim(["static", "energy_only", "feasibility_aware", "placement_only"], traces, jobs)
    expect = pd.Series({"j1": "b", "j2": "b"})
    for label in ("placement_only", "feasibility_aware"):
        pd.testing.assert_series_equal(_placed(t[label]), expect, check_names=False, obj=label)
        pd.testing.assert_series_equal(_initial_sites(t[label]), expect, check_names=False, obj=label)
    assert list(_placed(t["energy_only"])) == ["a", "a"] and list(_placed(t["static"])) == ["a", "a"]
    assert len(t["placement_only"]["migrations"]) == 0


def test_placement_only_is_feasibility_aware_whose_moves_never_pay():
    # min_gain beyond any utility gain: feasibility_aware never moves; every job then runs as under placement_only
    t = _quickstart(["placement_only", {"name": "feasibility_aware", "min_gain": 1e6}])
    po, still = t["placement_only"], t["feasibility_aware"]
    assert len(still["migrations"]) == 0
    pd.testing.assert_frame_equal(_what_it_did(po["jobs"]), _what_it_did(still["jobs"]))
    pd.testing.assert_frame_equal(_what_it_did(po["timeseries"]), _what_it_did(still["timeseries"]))


def test_placement_only_takes_no_migration_parameters():
    with pytest.raises(SpecError) as e:
        scenario_from_dict(small_scenario_dict(policies=[{"name": "placement_only", "alpha": 0.1}]))
    assert e.value.problems == [("policies[0].alpha", "unknown field")]


# -- feasibility_aware_paper ------------------------------------------------------------------------

def test_paper_makes_the_decisions_of_feasibility_aware_undamped():
    # two sites whose 1-hour windows alternate: every window asks for a move (test_policies_dwell)
    paper = _alternating_run({"name": "feasibility_aware_paper"})
    undamped = _alternating_run({"name": "feasibility_aware", "min_dwell_h": 0, "return_margin": 0})
    assert len(paper["migrations"]) >= 10
    for table in ("migrations", "decisions", "candidate_scores", "jobs"):
        pd.testing.assert_frame_equal(_what_it_did(paper[table]), _what_it_did(undamped[table]), obj=table)


def test_paper_equals_feasibility_aware_undamped_on_the_quickstart():
    t = _quickstart([{"name": "feasibility_aware_paper", "epsilon": 0.1},
                     {"name": "feasibility_aware", "epsilon": 0.1, "min_dwell_h": 0, "return_margin": 0}])
    paper, undamped = t["feasibility_aware_paper"], t["feasibility_aware"]
    assert len(paper["migrations"]) > 0
    for table in ("migrations", "decisions", "jobs"):
        pd.testing.assert_frame_equal(_what_it_did(paper[table]), _what_it_did(undamped[table]), obj=table)


def test_paper_is_not_held_by_a_minimum_dwell():
    damped = _gaps_h(_alternating_run({"name": "feasibility_aware"}))  # defaults: min_dwell_h 2, return_margin 1
    paper = _gaps_h(_alternating_run({"name": "feasibility_aware_paper"}))
    assert (damped >= 2.0).all() and (paper < 2.0).any()
    assert len(paper) > len(damped)


def test_paper_has_no_return_margin():
    # at 0.4 Gbit/s (alpha 1: Eq. 1 lets the 40 GB move take most of a window) a move back saves
    # 0.75 kWh for 0.4 kWh of transfer: Eq. 2 passes, the default return margin (1) does not
    policies = ({"name": "feasibility_aware_paper", "alpha": 1.0},
                {"name": "feasibility_aware", "alpha": 1.0, "min_dwell_h": 0},  # default return_margin 1
                {"name": "feasibility_aware", "alpha": 1.0, "min_dwell_h": 0, "return_margin": 0})
    paper, margin, undamped = (_alternating_run(p, bandwidth_gbps=0.4) for p in policies)
    assert list(zip(margin["migrations"]["src"], margin["migrations"]["dst"])) == [("a", "b")]
    assert margin["decisions"]["reason"].str.contains("a move back to a saves 0.750 kWh, not (1 + 1)", regex=False).any()
    moves = list(zip(paper["migrations"]["src"], paper["migrations"]["dst"]))
    assert len(moves) > 10 and ("b", "a") in moves  # it does move back
    assert not paper["decisions"]["reason"].str.contains("a move back").any()
    pd.testing.assert_frame_equal(_what_it_did(paper["migrations"]), _what_it_did(undamped["migrations"]))


@pytest.mark.parametrize("field", sorted(Damping.model_fields))
def test_setting_a_damping_field_on_the_paper_policy_is_refused(field):
    for value in (0, 1):
        with pytest.raises(SpecError) as e:
            scenario_from_dict(small_scenario_dict(policies=["static", {"name": "feasibility_aware_paper", field: value}]))
        [(where, why)] = e.value.problems
        assert where == "policies[1]" and why.startswith(f"{field}: ") and "without damping" in why, (where, why)


def test_every_damping_field_is_off_in_the_paper_policy():
    sc = scenario_from_dict(small_scenario_dict(policies=["feasibility_aware_paper"]))
    spec = sc.policies[0]
    assert {f: getattr(spec, f) for f in Damping.model_fields} == {f: 0.0 for f in Damping.model_fields}
    policy = make_policy(spec, sc)
    assert isinstance(policy, FeasibilityAwarePolicy)  # the same decision code
    assert policy.min_dwell_s == 0.0 and policy.return_margin == 0.0


# -- by name, from a scenario file --------------------------------------------------------------------

def test_both_run_by_name_from_a_scenario_file(tmp_path, capsys):
    d = small_scenario_dict(policies=["static", "placement_only", {"name": "feasibility_aware_paper", "alpha": 0.1}])
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(d))
    out = tmp_path / "out"
    assert main(["run", str(path), "--substrate", "sim", "--out", str(out), "--no-progress", "--no-plots"]) == 0
    capsys.readouterr()
    for label in ("placement_only", "feasibility_aware_paper"):
        assert json.loads((out / label / "summary.json").read_text())["policy"] == label
    manifest = json.loads((out / "manifest.json").read_text())
    resolved = manifest["scenario"]["resolved"]
    paper = resolved["policies"][2]
    assert paper["alpha"] == 0.1 and not set(Damping.model_fields) & set(paper)
    again = scenario_from_dict(resolved)  # the resolved scenario loads again
    assert [p.name for p in again.policies] == ["static", "placement_only", "feasibility_aware_paper"]


def test_schema_lists_both_without_damping_fields_on_the_paper_policy(capsys):
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    models = {m["properties"]["name"].get("const"): m for m in schema["$defs"].values()
              if "name" in m.get("properties", {})}
    assert set(models["placement_only"]["properties"]) == {"name", "label", "grid_topup_kw"}
    paper, fa = set(models["feasibility_aware_paper"]["properties"]), set(models["feasibility_aware"]["properties"])
    assert paper == fa - set(Damping.model_fields)
    assert set(Damping.model_fields) <= fa
