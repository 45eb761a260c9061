"""Policies named by class (``class: "module:Class"``, a file beside the scenario, or an installed
entry point): the examples in examples/policies run through `testbed run` on sim, for both studies,
and every bad reference is one error line naming the field, exit 2."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from testbed.cli import main
from testbed.spec import load_scenario, scenario_from_dict
from tests.conftest import ROOT, small_scenario_dict

EXAMPLES = ROOT / "examples" / "policies"


def _write(tmp_path: Path, d: dict, name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(d, sort_keys=False), encoding="utf-8")
    return path


def test_example_policy_runs_through_testbed_run(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", str(EXAMPLES / "window_greedy.yaml"), "--substrate", "sim", "--out", str(out),
                 "--no-progress"]) == 0
    capsys.readouterr()
    summary = json.loads((out / "window_greedy" / "summary.json").read_text())
    assert summary["label"] == "window_greedy" and summary["policy"] == "window_greedy.py:WindowGreedy"  # its file name, not its path
    decisions = pd.read_parquet(out / "window_greedy" / "decisions.parquet")
    moves = decisions[decisions["kind"] == "migrate"]
    assert len(moves) > 0  # it migrates, and weighed each destination by its own scores
    scores = pd.read_parquet(out / "window_greedy" / "candidate_scores.parquet")
    assert set(moves["decision"]) <= set(scores.loc[scores["score"] == "transfer_s", "decision"])
    migrations = pd.read_parquet(out / "window_greedy" / "migrations.parquet")
    assert len(migrations) == len(moves)  # each move recorded with predicted and actual times
    # sim measures nothing: the substrate's outcome is filed as model_* (actual_* only hold measurements)
    assert migrations["predicted_total_s"].notna().all() and migrations["outcome_total_s"].notna().all()
    # the manifest's resolved scenario loads again (the entry now carries the class's tag as name)
    manifest = json.loads((out / "manifest.json").read_text())
    resolved = {k: v for k, v in manifest["scenario"]["resolved"].items() if k != "topology"}  # sites inline
    sc = scenario_from_dict(resolved, EXAMPLES)
    assert [p.label or p.name for p in sc.policies] == ["static", "feasibility_aware", "window_greedy"]


def test_import_path_form_with_params_and_label(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)  # examples.policies.window_greedy is found from the working directory
    d = small_scenario_dict(policies=[
        "static",
        {"class": "examples.policies.window_greedy:WindowGreedy", "label": "wg", "max_transfer_frac": 0.5},
    ])
    path = _write(tmp_path, d)
    sc = load_scenario(path).scenario
    entry = sc.policies[1]
    assert entry.name == "examples.policies.window_greedy:WindowGreedy" and entry.label == "wg"
    assert entry.max_transfer_frac == 0.5 and entry.min_remaining_h == 0.5
    out = tmp_path / "out"
    assert main(["run", str(path), "--substrate", "sim", "--out", str(out), "--no-progress"]) == 0
    capsys.readouterr()
    assert (out / "wg" / "summary.json").is_file()


def test_federated_example_selection_policy_runs(tmp_path, capsys):
    from tests.unit.federated_support import tiny

    shutil.copy(EXAMPLES / "nearest_powered.py", tmp_path / "nearest_powered.py")
    d = tiny(max_rounds=2)
    d["policies"] = [{"class": "nearest_powered.py:NearestPowered", "k": 2}, {"name": "random", "k": 2}]
    path = _write(tmp_path, d)
    out = tmp_path / "out"
    assert main(["run", str(path), "--substrate", "sim", "--out", str(out), "--no-progress"]) == 0
    capsys.readouterr()
    rounds = pd.read_parquet(out / "nearest_powered" / "rounds.parquet")
    assert len(rounds) >= 1
    assert (out / "random" / "summary.json").is_file()


PLUGIN_SRC = '''
from testbed.controller.policy_api import Policy

class NotAPolicy:
    pass

class Half(Policy):
    def decide(self, view):
        return [], []

class Boom(Policy):
    raise RuntimeError("plug-in failed at import")
'''


@pytest.mark.parametrize("entry, expected", [
    ({"class": "no_such_pkg.mod:X"}, "policies[0].class: cannot import 'no_such_pkg.mod': no module named 'no_such_pkg'"),
    ({"class": "pathlib:Path"}, "policies[0].class: 'pathlib:Path' is not a policy class: subclass "
                                "testbed.controller.policy_api.Policy (migration study) or "
                                "testbed.federated.policies.SelectionPolicy (federated study)"),
    ({"class": "pathlib:NoSuch"}, "policies[0].class: module 'pathlib' has no attribute 'NoSuch'"),
    ({"class": "pathlib"}, "policies[0].class: no installed policy 'pathlib' (entry point group testbed.policies"),
    ({"class": "pathlib:not a name"}, "policies[0].class: 'not a name' is not a class name"),
    ({"class": 3}, "policies[0].class: must be 'package.module:ClassName'"),
    ({"class": "missing.py:X"}, "policies[0].class: file not found: missing.py"),
    ({"class": "plug.py:NotAPolicy"}, "policies[0].class: "),
    ({"class": "plug.py:Half"}, "does not implement place"),
    ({"class": "boom.py:Boom"}, "policies[0].class: importing 'boom.py' failed: RuntimeError: plug-in failed at import"),
    ({"class": "window_greedy.py:WindowGreedy", "max_transfer_frac": 2},
     "policies[0].max_transfer_frac: must be <= 1"),
    ({"class": "window_greedy.py:WindowGreedy", "max_transfer_frc": 0.1}, "policies[0].max_transfer_frc: "),
    ({"class": "window_greedy.py:WindowGreedy", "name": "static"},
     "policies[0].class: give 'class' (a plug-in) or 'name' (a registered policy), not both"),
])
def test_bad_class_entries_exit_2_naming_the_field(tmp_path, capsys, entry, expected):
    (tmp_path / "plug.py").write_text(PLUGIN_SRC.split("class Boom")[0])
    (tmp_path / "boom.py").write_text(PLUGIN_SRC)
    shutil.copy(EXAMPLES / "window_greedy.py", tmp_path / "window_greedy.py")
    path = _write(tmp_path, small_scenario_dict(policies=[entry]))
    out = tmp_path / "out"
    assert main(["run", str(path), "--substrate", "sim", "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}: ") and expected in lines[0], err
    assert "Traceback" not in err and not out.exists()


def test_a_migration_class_in_a_federated_scenario_is_refused(tmp_path, capsys):
    from tests.unit.federated_support import tiny

    shutil.copy(EXAMPLES / "window_greedy.py", tmp_path / "window_greedy.py")
    d = tiny()
    d["policies"] = [{"class": "window_greedy.py:WindowGreedy"}]
    path = _write(tmp_path, d)
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "policies[0]: " in err and "is a migration policy; a federated scenario takes" in err, err


def test_installed_entry_point_by_class_and_by_name(tmp_path, monkeypatch, capsys):
    """An installed package's entry point (group testbed.policies) names the class."""
    site = tmp_path / "site"
    pkg = site / "labpolicies"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    shutil.copy(EXAMPLES / "window_greedy.py", pkg / "greedy.py")
    dist = site / "labpolicies-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: labpolicies\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[testbed.policies]\nlab_greedy = labpolicies.greedy:WindowGreedy\n")
    monkeypatch.syspath_prepend(str(site))
    from testbed.policies.plugins import entry_point_names

    assert "lab_greedy" in entry_point_names()
    d = small_scenario_dict(policies=[{"class": "lab_greedy", "label": "g1"}, {"name": "lab_greedy", "label": "g2"}])
    sc = scenario_from_dict(d, tmp_path)
    assert [(p.name, p.label) for p in sc.policies] == [("lab_greedy", "g1"), ("lab_greedy", "g2")]
    path = _write(tmp_path, d)
    assert main(["run", str(path), "--substrate", "sim", "--out", str(tmp_path / "out"), "--no-progress"]) == 0
    capsys.readouterr()
    assert (tmp_path / "out" / "g2" / "summary.json").is_file()


def test_a_class_entry_crosses_to_another_process(tmp_path):
    """Sweeps run trials in fresh processes (forkserver, Ray): the scenario is pickled there, and the
    plug-in's spec is rebuilt by loading its class again."""
    import pickle
    import subprocess
    import sys

    sc = load_scenario(EXAMPLES / "window_greedy.yaml").scenario
    (tmp_path / "sc.pkl").write_bytes(pickle.dumps(sc))
    code = ("import pickle, sys; sc = pickle.load(open(sys.argv[1], 'rb')); p = sc.policies[2]; "
            "from testbed.policies import make_policy; pol = make_policy(p, sc); "
            "print(type(pol).__name__, p.label, p.max_transfer_frac)")
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path / "sc.pkl")], cwd=tmp_path, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["WindowGreedy", "window_greedy", "0.2"]
