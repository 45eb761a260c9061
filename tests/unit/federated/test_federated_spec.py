import pytest

from testbed.errors import SpecError
from testbed.spec.load import load_scenario, scenario_from_dict
from tests.unit.federated_support import tiny


def _problems(d) -> str:
    with pytest.raises(SpecError) as e:
        scenario_from_dict(d)
    return "\n".join(e.value.lines())


def test_tiny_scenario_validates():
    sc = scenario_from_dict(tiny())
    assert sc.federated.aggregator == "agg" and sc.workloads is None
    assert [p.name for p in sc.policies] == ["random", "static_k", "fixed_radius", "centralized", "powertrip"]


@pytest.mark.parametrize("path", ["scenarios/powertrip-us100.yaml", "scenarios/powertrip-emulated-12.yaml"])
def test_shipped_scenarios_validate(path):
    assert load_scenario(path).scenario.federated is not None


def test_bad_references_name_the_field():
    d = tiny()
    d["federated"]["aggregator"] = "nowhere"
    assert "federated.aggregator" in _problems(d)
    d = tiny()
    d["links"] = d["links"][:-1]
    assert "'tiny' has no link to the aggregator" in _problems(d)
    d = tiny()
    d["policies"] = ["static"]
    assert "policies[0]" in _problems(d) and "migration policy" in _problems(d)
    d = tiny()
    d["policies"] = [{"name": "static_k", "k": 9}]
    assert "policies[0].k" in _problems(d)


def test_one_study_per_scenario():
    d = tiny()
    d["workloads"] = {"jobs": [{"checkpoint_gb": 1, "work_gpu_h": 1}]}
    assert "not both or neither" in _problems(d)


def test_selection_policies_need_a_federated_block():
    d = tiny()
    del d["federated"]
    d["workloads"] = {"jobs": [{"checkpoint_gb": 1, "work_gpu_h": 1}]}
    assert "needs a 'federated:' block" in _problems(d)


def test_google_synthetic_needs_one_capacity():
    d = tiny()
    d["traces"]["renewable"]["default"] = {"kind": "google_synthetic"}
    assert "exactly one of capacity_kw and capacity_per_active" in _problems(d)


def test_max_hours_within_the_run():
    d = tiny()
    d["federated"]["max_hours"] = 5
    assert "federated.max_hours" in _problems(d)


def test_federated_refuses_mininet(tmp_path):
    from tests.unit.federated.test_federated_run import _loaded
    from testbed.runner import run_scenario as run_federated

    with pytest.raises(SpecError, match="sim or netns"):
        run_federated(_loaded(), out_dir=tmp_path / "x", substrate="mininet", seed=None, progress=False,
                      force=False, argv=[])


def test_a_list_of_clocks_runs_every_policy_under_each():
    from testbed.spec.federated_checks import output_labels, policy_entries

    d = tiny(round_time=["straggler", "pooled"])
    d["policies"].append({"name": "static_k", "label": "k1-eq7", "k": 1, "round_time": "pooled_eq7_as_written"})
    entries = policy_entries(scenario_from_dict(d))
    got = [(e.label or e.name, e.round_time) for e in entries]
    assert ("powertrip", "straggler") in got and ("powertrip-pooled", "pooled") in got
    assert ("static_k-pooled", "pooled") in got and ("k1-eq7", "pooled_eq7_as_written") in got  # its own clock
    assert len(entries) == 2 * 5 + 1
    assert {"static_k-pooled-k1", "static_k-pooled-k3"} <= set(output_labels(entries))


def test_clock_lists_refuse_bad_or_clashing_entries():
    assert "federated.round_time" in _problems(tiny(round_time=[]))
    assert "federated.round_time" in _problems(tiny(round_time=["pooled", "pooled"]))
    d = tiny(round_time=["straggler", "pooled"])
    d["policies"].append({"name": "powertrip", "label": "powertrip-pooled", "round_time": "pooled"})
    assert "output labels must be unique" in _problems(d) and "powertrip-pooled" in _problems(d)


def test_centralized_takes_its_own_learning_rate():
    d = tiny()
    d["policies"][3] = {"name": "centralized", "lr": 0.02}
    assert scenario_from_dict(d).policies[3].lr == 0.02
    d["policies"][3] = {"name": "centralized", "lr": 0}
    assert "policies[3].lr" in _problems(d)
