"""SWEEP.yaml: validation (one line per problem, naming file, field and cell), paths, expansion."""

from __future__ import annotations

import pytest

from testbed.cli import main
from testbed.errors import SpecError
from testbed.sweep import load_sweep_file, plan_sweep
from testbed.sweep.aggregate import _metric_names
from testbed.spec.overrides import OverrideError, references, set_path, substitute
from testbed.sweep.runner import parallel_for
from tests.conftest import ROOT
from tests.unit.sweep_support import GRID_2X2, write_sweep


def _problems(path) -> list[str]:
    with pytest.raises(SpecError) as e:
        plan_sweep(load_sweep_file(path))
    return e.value.lines()


# -- paths -------------------------------------------------------------------------------------

def test_set_path_creates_mappings_and_selects_list_entries():
    data = {"traces": {"renewable": {}}, "links": [{"a": "x", "b": "y"}], "policies": ["static", {"name": "no_filter"}]}
    set_path(data, "traces.bandwidth.steady_degradation_pct", 20)
    set_path(data, "links[0].bandwidth_gbps", 5)
    set_path(data, "links[-1].latency_ms", 7)
    set_path(data, "policies[static].label", "s")
    set_path(data, "policies[no_filter].epsilon", 0.1)
    assert data["traces"]["bandwidth"] == {"steady_degradation_pct": 20}
    assert data["links"] == [{"a": "x", "b": "y", "bandwidth_gbps": 5, "latency_ms": 7}]
    assert data["policies"] == [{"name": "static", "label": "s"}, {"name": "no_filter", "epsilon": 0.1}]
    set_path(data, "policies[s].label", "t")  # a label wins over the name
    assert data["policies"][0]["label"] == "t"


@pytest.mark.parametrize("path, message", [
    ("links[3].bandwidth_gbps", "links[3]: index out of range (the list has 1 entries)"),
    ("policies[fa].alpha", "policies: no entry with label or name 'fa' (present: no_filter, static)"),
    ("links[0].a.b", "links[0].a: is not a mapping"),
    ("policies.alpha", "policies: is not a mapping"),
])
def test_set_path_errors_name_the_failing_part(path, message):
    data = {"links": [{"a": "x"}], "policies": ["static", "no_filter"]}
    with pytest.raises(OverrideError, match=None) as e:
        set_path(data, path, 1)
    assert message in str(e.value)


def test_parameters_substitute_whole_strings_keeping_their_type():
    value = {"events": [{"link": "*", "degradation_pct": "${deg}", "note": "deg is ${deg}"}]}
    assert references(value) == {"deg"}
    out = substitute(value, {"deg": 35})
    assert out["events"][0]["degradation_pct"] == 35 and out["events"][0]["note"] == "deg is ${deg}"


# -- expansion ---------------------------------------------------------------------------------

def test_example_sweep_expands_to_4_cells_and_12_trials():
    plan = plan_sweep(load_sweep_file(ROOT / "sweeps" / "example-2x2x3.yaml"))
    assert len(plan.cells) == 4 and len(plan.trials) == 12
    assert plan.substrate == "sim"
    assert plan.param_columns == ("traces.bandwidth.steady_degradation_pct", "feasibility.alpha",
                                  "policies[feasibility_aware].alpha")
    c = plan.cells[1]
    assert c.id == "001-steady_degradation_pct=0_alpha=0.2"
    sc = c.loaded.scenario
    assert sc.feasibility.alpha == 0.2 and sc.traces.bandwidth.steady_degradation_pct == 0
    assert [getattr(p, "alpha", None) for p in sc.policies] == [None, None, 0.2, 0.1]  # only the named policy
    assert [t.seed for t in plan.trials[:3]] == [0, 1, 2]
    assert plan.trials[0].rel_dir == "trials/000-steady_degradation_pct=0_alpha=0.05/seed-0"
    assert len({t.key for t in plan.trials}) == 12
    assert "# overrides:" in c.loaded.text and "steady_degradation_pct: 50" in plan.cells[2].loaded.text


def test_variants_cross_the_grid_and_reuse_parameters(tmp_path):
    path = write_sweep(tmp_path, {
        "seeds": [4, 9],
        "grid": {"$deg": [20, 50], "feasibility.alpha": [0.1]},
        "variants": [
            {"name": "steady", "set": {"traces.bandwidth.steady_degradation_pct": "${deg}"}},
            {"name": "events", "set": {"traces.bandwidth.events": [
                {"link": "*", "start_h": 2, "duration_h": 4, "degradation_pct": "${deg}"}]}},
        ],
    })
    plan = plan_sweep(load_sweep_file(path))
    assert [c.id for c in plan.cells] == ["000-steady_deg=20_alpha=0.1", "001-steady_deg=50_alpha=0.1",
                                          "002-events_deg=20_alpha=0.1", "003-events_deg=50_alpha=0.1"]
    assert plan.param_columns == ("variant", "$deg", "feasibility.alpha")
    assert plan.cells[1].loaded.scenario.traces.bandwidth.steady_degradation_pct == 50
    ev = plan.cells[3].loaded.scenario.traces.bandwidth.events
    assert len(ev) == 1 and ev[0].degradation_pct == 50
    assert [t.seed for t in plan.trials[:2]] == [4, 9] and len(plan.trials) == 8


def test_a_variant_can_run_at_some_grid_points_only(tmp_path):
    """The 0 % cell of a degradation sweep is one run, not one per variant (counted once)."""
    path = write_sweep(tmp_path, {
        "seeds": [4],
        "grid": {"$deg": [0, 20, 50]},
        "variants": [
            {"name": "steady", "set": {"traces.bandwidth.steady_degradation_pct": "${deg}"}},
            {"name": "events", "when": {"$deg": [20, 50]}, "set": {"traces.bandwidth.events": [
                {"link": "*", "start_h": 2, "duration_h": 4, "degradation_pct": "${deg}"}]}},
        ],
    })
    plan = plan_sweep(load_sweep_file(path))
    assert [(c.variant, c.params["$deg"]) for c in plan.cells] == [
        ("steady", 0), ("steady", 20), ("steady", 50), ("events", 20), ("events", 50)]
    assert len({c.id for c in plan.cells}) == 5 and len(plan.trials) == 5


def test_variant_when_must_name_grid_axes_and_their_values(tmp_path):
    path = write_sweep(tmp_path, {"grid": {"$deg": [0, 20]}, "variants": [
        {"name": "a", "set": {"traces.bandwidth.steady_degradation_pct": "${deg}"}, "when": {"$deg": [30], "$x": [1]}},
        {"name": "b", "set": {"traces.bandwidth.steady_degradation_pct": "${deg}"}, "when": {"$deg": []}}]})
    lines = _problems(path)
    assert f"{path}: variants[0].when[$deg]: 30 is not a value of grid[$deg]" in lines
    assert f"{path}: variants[0].when[$x]: not a grid axis (axes: $deg)" in lines
    assert f"{path}: variants[1].when[$deg]: must list at least one value" in lines


def test_zipped_axis_takes_one_value_per_path(tmp_path):
    path = write_sweep(tmp_path, {"seeds": None, "grid": {
        "feasibility.alpha, policies[feasibility_aware].alpha": [[0.05, 0.1], 0.2]}})
    plan = plan_sweep(load_sweep_file(path))
    (a, b) = (c.loaded.scenario for c in plan.cells)
    assert (a.feasibility.alpha, a.policies[1].alpha) == (0.05, 0.1)
    assert (b.feasibility.alpha, b.policies[1].alpha) == (0.2, 0.2)
    assert [t.seed for t in plan.trials] == [1, 1]  # no seeds: the scenario's own


def test_no_grid_is_one_cell_and_topology_links_can_be_overridden(tmp_path):
    sweep = tmp_path / "s.yaml"
    sweep.write_text(f"scenario: {ROOT / 'scenarios' / 'paper-migration-5node-7day.yaml'}\n"
                     "grid:\n  links[0].bandwidth_gbps: [1, 2]\n")
    plan = plan_sweep(load_sweep_file(sweep))
    assert [c.loaded.scenario.links[0].bandwidth_gbps for c in plan.cells] == [1, 2]
    assert len(plan.cells[0].loaded.scenario.sites) == 5
    (tmp_path / "t.yaml").write_text(f"scenario: {ROOT / 'scenarios' / 'quickstart.yaml'}\nseeds: 2\n")
    plan = plan_sweep(load_sweep_file(tmp_path / "t.yaml"))
    assert [c.id for c in plan.cells] == ["000"] and plan.cells[0].params == {} and len(plan.trials) == 2


# -- validation --------------------------------------------------------------------------------

def test_file_level_errors_name_file_and_field(tmp_path):
    path = write_sweep(tmp_path, {"seeds": [1, 1], "parallel": 0, "bogus": 1, "substrate": "vm"})
    lines = _problems(path)
    assert f"{path}: seeds: seeds must be unique" in lines
    assert f"{path}: bogus: unknown field" in lines
    assert f"{path}: parallel: must be >= 1 (got 0)" in lines
    assert any(line.startswith(f"{path}: substrate: unknown substrate 'vm' (known: auto, sim, netns") for line in lines)


def test_grid_and_variant_errors(tmp_path):
    path = write_sweep(tmp_path, {"grid": {
        "x..y": [1], "feasibility.alpha, feasibility.t_load_s": [[1, 2, 3]], "traces.bandwidth.cv": [1, 1], "$p": [1],
        "feasibility.robust_degradation_frac": [],
    }})
    lines = _problems(path)
    assert any("grid[x..y]: not a valid path 'x..y'" in line for line in lines)
    assert f"{path}: grid[feasibility.alpha, feasibility.t_load_s][0]: a zipped axis of 2 paths takes one value " \
           "or a list of 2 (got 3)" in lines
    assert f"{path}: grid[traces.bandwidth.cv]: value 1 is listed twice (it would repeat a cell)" in lines
    assert f"{path}: grid[feasibility.robust_degradation_frac]: must list at least one value" in lines
    path = write_sweep(tmp_path, {"grid": {"feasibility.alpha": [0.1], "$p": [1], "$q": [2]}, "variants": [
        {"name": "v", "set": {"feasibility.alpha": 0.2, "seed": "${r}", "description": "${q}"}}, {"name": "v"}],
        "metrics": ["a b", "x", "x"]})
    lines = _problems(path)
    assert f"{path}: variants[0].set[feasibility.alpha]: path 'feasibility.alpha' is also a grid axis " \
           "(grid[feasibility.alpha])" in lines
    assert f"{path}: variants[0].set[seed]: uses ${{r}} but the grid has no $r axis" in lines
    assert f"{path}: variants[1].name: duplicate variant 'v'" in lines
    assert f"{path}: grid[$p]: parameter $p is not used by any variant (write \"${{p}}\" in a variant)" in lines
    assert f"{path}: metrics[0]: not a summary column name: 'a b'" in lines and f"{path}: metrics: lists a column twice" in lines


def test_bad_values_fail_up_front_naming_the_cells(tmp_path):
    path = write_sweep(tmp_path, {"grid": {
        "feasibility.alpha": [0.1, 2], "traces.bandwidth.nope": [1], "policies[fa].epsilon": [0.1]}})
    lines = _problems(path)
    assert lines == [
        f"{path}: grid[policies[fa].epsilon]: policies: no entry with label or name 'fa' "
        "(present: feasibility_aware, static)",
        f"{path}: grid[traces.bandwidth.nope]: unknown field (did you mean emulation.nodes or sites[a].nodes or "
        "sites[b].nodes?)",  # once, not in every cell, with the nearest keys as --set names them
        f"{path}: cell 001-alpha=2_nope=1_epsilon=0.1: feasibility.alpha: must be <= 1.0 (got 2)",
    ]


@pytest.mark.parametrize("grid, line", [
    ({"feasibility.alpah": [0.05, 0.2]}, "grid[feasibility.alpah]: unknown field (did you mean alpha?)"),
    ({"policies[feasibility_aware].alpah": [0.05]},
     "grid[policies[feasibility_aware].alpah]: unknown field (did you mean alpha?)"),
    ({"feasibilty.alpha": [0.05, 0.2]}, "grid[feasibilty.alpha]: feasibilty: unknown field (did you mean feasibility?)"),
    ({"alpah": [0.05, 0.2]}, "grid[alpah]: unknown field (did you mean feasibility.alpha or "
                             "policies[feasibility_aware].alpha?)"),
    ({"feasibility.alpha, policies[feasibility_aware].alpah": [0.05, 0.2]},
     "grid[feasibility.alpha, policies[feasibility_aware].alpah]: policies[feasibility_aware].alpah: "
     "unknown field (did you mean alpha?)"),
])
def test_a_grid_key_that_is_no_scenario_field_is_named_as_typed_once(tmp_path, grid, line):
    path = write_sweep(tmp_path, {"grid": grid})
    assert _problems(path) == [f"{path}: {line}"]  # one line, not one per cell, before any trial


def test_a_variant_key_that_is_no_scenario_field_is_named_by_the_variant(tmp_path):
    path = write_sweep(tmp_path, {"grid": {"feasibility.alpha": [0.05, 0.2]},
                                  "variants": [{"name": "v", "set": {"traces.bandwith.cv": 0.1}}]})
    assert _problems(path) == [f"{path}: variants[0].set[traces.bandwith.cv]: traces.bandwith: unknown field "
                               "(did you mean bandwidth?)"]


def test_the_cli_stops_a_mistyped_grid_key_before_any_trial(tmp_path, capsys):
    path = write_sweep(tmp_path, {"grid": {"feasibility.alpah": [0.05, 0.2]}})
    assert main(["sweep", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: {path}: grid[feasibility.alpah]: unknown field (did you mean alpha?)"]
    assert not (tmp_path / "out").exists()


def test_missing_scenario_and_invalid_base_scenario(tmp_path):
    (tmp_path / "s.yaml").write_text("scenario: nowhere.yaml\n")
    with pytest.raises(SpecError) as e:
        load_sweep_file(tmp_path / "s.yaml")
    assert e.value.lines() == [f"{tmp_path / 's.yaml'}: scenario: file not found: nowhere.yaml (relative to the sweep file)"]
    bad = write_sweep(tmp_path, scenario={"name": "x", "duration_h": -1})
    lines = _problems(bad)
    assert f"{bad}: scenario scenario.yaml: duration_h: must be > 0.0 (got -1)" in lines


def test_cli_exit_2_one_line_per_problem_and_nothing_written(tmp_path, capsys):
    path = write_sweep(tmp_path, {"grid": {"feasibility.alpha": [0.1, 2]}})
    out = tmp_path / "out"
    assert main(["sweep", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: {path}: cell 001-alpha=2: feasibility.alpha: must be <= 1.0 (got 2)"]
    assert not out.exists()
    assert main(["sweep", str(path), "--parallel", "0", "--dry-run"]) == 2
    assert "--parallel: must be a positive integer" in capsys.readouterr().err


def test_dry_run_lists_trials_and_writes_nothing(tmp_path, capsys):
    path = write_sweep(tmp_path)
    out = tmp_path / "out"
    assert main(["sweep", str(path), "--out", str(out), "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert "4 cells, 12 trials: 0 done" in text and text.count("to run") == 12 + 1
    assert "trials/003-steady_degradation_pct=50_alpha=0.2/seed-2" in text
    assert not out.exists()


def test_parallelism_defaults_and_emulation_cap(tmp_path, monkeypatch):
    plan = plan_sweep(load_sweep_file(write_sweep(tmp_path, {"grid": GRID_2X2})))
    monkeypatch.setattr("os.cpu_count", lambda: 8)
    assert parallel_for(plan, None, 12) == (8, None)
    assert parallel_for(plan, None, 3) == (3, None)
    assert parallel_for(plan, 5, 12) == (5, None)
    netns = plan_sweep(load_sweep_file(write_sweep(tmp_path, {"substrate": "netns"})))
    assert netns.substrate == "netns"
    assert parallel_for(netns, None, 12) == (1, None)  # emulation: one at a time unless asked
    n, note = parallel_for(netns, 8, 12)  # side by side, each trial with a CPU share (testbed/sweep/share.py)
    assert n == 8 and "8 at once on 8 CPUs" in note and "equal CPU share" in note
    assert parallel_for(netns, 8, 3)[0] == 3  # no more workers than trials
    with pytest.raises(SpecError) as e:  # more emulations at once than CPUs: refused, naming the option
        parallel_for(netns, 16, 12)
    assert e.value.lines() == ["--parallel: 16 netns trials at once need at least 16 CPUs and this machine has 8: "
                               "at most 8"]
    n, note = parallel_for(netns, 16, 12, ray=True)  # on Ray: spread over the cluster, capped for --ray local
    assert n == 4 and "capped at 4" in note
    assert {t.key for t in netns.trials}.isdisjoint({t.key for t in plan.trials})  # the substrate is in the key


def test_metric_names_default_to_numeric_columns_and_unknown_ones_are_errors(tmp_path):
    rows = [{"policy": "static", "label": "static", "a_kwh": 1.0, "n": 2, "maybe": None, "text": "x"}]
    assert _metric_names(rows, None, tmp_path / "s.yaml") == ["a_kwh", "n", "maybe"]
    with pytest.raises(SpecError) as e:
        _metric_names(rows, ["a_kwh", "nope", "text"], tmp_path / "s.yaml")
    assert e.value.lines()[0].startswith(f"{tmp_path / 's.yaml'}: metrics[1]: no summary column 'nope' (known: ")
    assert e.value.lines()[1] == f"{tmp_path / 's.yaml'}: metrics[2]: summary column 'text' is not numeric"


def test_cells_with_the_same_scenario_are_an_error(tmp_path):
    path = write_sweep(tmp_path, {"grid": {"$deg": [20, 50]}, "variants": [
        {"name": "steady", "set": {"traces.bandwidth.steady_degradation_pct": "${deg}"}},
        {"name": "none"}]})
    assert _problems(path) == [f"{path}: cell 003-none_deg=50: the same scenario as cell 002-none_deg=20 "
                               "(a parameter changes nothing here)"]


def test_a_sweep_from_python_names_a_mistyped_grid_key_the_same_way():
    import testbed
    from tests.unit.sweep_support import tiny_scenario

    with pytest.raises(SpecError) as e:
        testbed.sweep(tiny_scenario(), grid={"feasibility.alpah": [0.05, 0.2]}, seeds=2)
    assert e.value.problems == [("sweep: grid[feasibility.alpah]", "unknown field (did you mean alpha?)")]
