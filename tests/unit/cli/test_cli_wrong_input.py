"""Refusals that help: a file of the wrong kind gets one line naming the command that takes it, a
mistyped policy label gets a suggestion, ``--substrate`` lists its choices on every command."""

from __future__ import annotations

import pytest
import yaml

from testbed.cli import main
from tests.conftest import ROOT

SWEEP = ROOT / "sweeps" / "example-2x2x3.yaml"
TOPOLOGY = ROOT / "topologies" / "eu-5.yaml"
QUICKSTART = ROOT / "scenarios" / "quickstart.yaml"


def _err(capsys) -> list[str]:
    return capsys.readouterr().err.strip().splitlines()


def test_run_given_a_sweep_says_so_in_one_line(capsys):
    assert main(["run", str(SWEEP)]) == 2
    assert _err(capsys) == [f"error: {SWEEP}: this is a sweep, not a scenario file: run it with `testbed sweep {SWEEP}`"]


def test_run_given_a_topology_says_which_command_takes_it(capsys):
    assert main(["run", str(TOPOLOGY)]) == 2
    assert _err(capsys) == [f"error: {TOPOLOGY}: this is a topology, not a scenario file: `testbed net up {TOPOLOGY}` "
                            "takes it, and a scenario names it in `topology:`"]


def test_sweep_given_a_topology_says_so_in_one_line(capsys):
    assert main(["sweep", str(TOPOLOGY)]) == 2
    err = _err(capsys)
    assert len(err) == 1 and "this is a topology, not a sweep file: `testbed net up" in err[0]


def test_validate_checks_a_topology_file_as_a_topology(tmp_path, capsys):
    assert main(["validate", str(TOPOLOGY)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{TOPOLOGY}: ok (topology file, 5 sites, 10 links: `testbed net up {TOPOLOGY}` takes it")
    bad = tmp_path / "t.yaml"
    bad.write_text(yaml.safe_dump({"name": "t", "sites": [{"name": "a", "lat_deg": 100, "lon_deg": 0}]}))
    assert main(["validate", str(bad)]) == 2
    err = _err(capsys)
    assert len(err) == 1 and err[0].startswith(f"error: {bad}: sites[0].lat_deg:"), err


def test_a_scenario_naming_a_scenario_as_its_topology_is_told_so(tmp_path, capsys):
    d = yaml.safe_load(QUICKSTART.read_text())
    del d["sites"], d["links"]
    d["topology"] = str(QUICKSTART)
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(d))
    assert main(["validate", str(path)]) == 2
    err = _err(capsys)
    assert len(err) == 1 and "this is a scenario, not a topology file" in err[0], err


def test_a_mistyped_policy_label_in_a_sweep_grid_gets_a_suggestion(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(f"scenario: {QUICKSTART}\nseeds: [1]\ngrid:\n  policies[feasibility_awar].alpha: [0.1, 0.2]\n")
    assert main(["validate", str(path)]) == 2
    err = _err(capsys)
    assert len(err) == 1 and err[0] == (
        f"error: {path}: grid[policies[feasibility_awar].alpha]: policies: no entry with label or name "
        "'feasibility_awar' (did you mean feasibility_aware?) (present: energy_only, feasibility_aware, no_filter, static)")


def test_a_mistyped_policy_label_in_set_gets_a_suggestion(tmp_path, capsys):
    assert main(["run", str(QUICKSTART), "--set", "policies[feasibility_awar].alpha=0.2",
                 "--out", str(tmp_path / "r")]) == 2
    err = _err(capsys)
    assert len(err) == 1 and "'feasibility_awar' (did you mean feasibility_aware?)" in err[0], err


@pytest.mark.parametrize("command", ["run", "sweep"])
def test_substrate_choices_are_listed_by_every_command(command, capsys):
    target = QUICKSTART if command == "run" else SWEEP
    assert main([command, str(target), "--substrate", "simm"]) == 2
    err = _err(capsys)
    from testbed.substrate import substrate_choices

    names = list(substrate_choices())  # the built-in ones, and any a plug-in registered in this process
    assert names[:4] == ["auto", "sim", "netns", "mininet"]
    assert len(err) == 1 and f"error: testbed {command}: argument --substrate: invalid choice: 'simm' (did you mean " \
        f"sim?) (choose from {', '.join(names)})" in err[0], err
    assert main([command, "--help"]) == 0
    assert f"--substrate {{{','.join(names)}}}" in " ".join(capsys.readouterr().out.split())
