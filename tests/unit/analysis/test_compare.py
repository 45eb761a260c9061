"""``testbed compare`` / ``testbed.compare`` (issue #30): the resolved scenarios' differences path by
path, per policy and metric the change with a 95 % CI paired by seed where the seeds match (and
said to be unpaired or absent, with the reason, where they do not), clear errors for a path that
holds no results."""

from __future__ import annotations

import math

import numpy as np
import pytest

import testbed
from testbed.analysis.run_compare import ABSENT, Group, change, compare_groups, scenario_diff
from testbed.cli import main
from testbed.errors import SpecError
from testbed.stats import paired_test, t_interval
from tests.unit.sweep_support import tiny_scenario

FA = "feasibility_aware"


def _runs(folder, seeds, **overrides):
    """One run per seed in ``folder/seed-<s>`` (the layout of a sweep's cell); the folder."""
    sc = testbed.load(tiny_scenario(), overrides=overrides or None)
    for s in seeds:
        testbed.run(sc, out=folder / f"seed-{s}", seed=s, progress=False, plots=False)
    return folder


@pytest.fixture(scope="module")
def cells(tmp_path_factory):
    root = tmp_path_factory.mktemp("compare")
    return (_runs(root / "fast", range(3)),
            _runs(root / "slow", [0, 1, 2, 5], **{"links[0].bandwidth_gbps": 1,
                                                  "traces.renewable.default.capacity_kw": 1.0}))


# -- the pure parts --------------------------------------------------------------------------------

def test_scenario_diff_names_paths_by_label_and_index():
    a = {"seed": 1, "links": [{"a": "x", "b": "y", "bandwidth_gbps": 10.0}],
         "policies": [{"name": "static"}, {"name": FA, "alpha": 0.1}], "sites": [{"name": "rome", "nodes": 2}],
         "traces": {"bandwidth": {"cv": 0.1}}}
    b = {"seed": 2, "links": [{"a": "x", "b": "y", "bandwidth_gbps": 5}],
         "policies": [{"name": FA, "alpha": 0.2}, {"name": "static"}, {"name": "no_filter"}],
         "sites": [{"name": "rome", "nodes": 2}], "traces": {}}
    assert scenario_diff(a, b) == [  # the seed is what pairing is about: not a difference
        ("links[0].bandwidth_gbps", 10.0, 5),
        (f"policies[{FA}].alpha", 0.1, 0.2),
        ("policies[no_filter]", ABSENT, {"name": "no_filter"}),
        ("traces.bandwidth", {"cv": 0.1}, ABSENT),
    ]
    assert scenario_diff(a, a) == [] and scenario_diff({"x": 10}, {"x": 10.0}) == []


def test_paired_change_is_the_t_interval_of_the_per_seed_differences():
    base = {0: 1.0, 1: 2.0, 2: 4.0, 3: 3.0}
    other = {0: 1.5, 1: 2.1, 2: 5.0, 3: 3.2, 9: 100.0}
    row = change(base, other)
    d = np.array([0.5, 0.1, 1.0, 0.2])
    iv = t_interval(d)
    assert row["ci"] == "paired" and row["n_pairs"] == 4
    assert math.isclose(row["change"], d.mean()) and (row["ci_lo"], row["ci_hi"]) == pytest.approx((iv.lo, iv.hi))
    assert row["p_value"] == pytest.approx(paired_test([1.5, 2.1, 5.0, 3.2], [1.0, 2.0, 4.0, 3.0]).t_p)
    assert "seeds 0-3" in row["note"] and "seed 9 only in the other" in row["note"]
    assert row["mean_other"] == pytest.approx(np.mean([1.5, 2.1, 5.0, 3.2]))  # over the pairs, not seed 9


def test_unmatched_seeds_give_an_unpaired_ci_or_none_and_say_why():
    row = change({0: 1.0, 1: 2.0, 2: 3.0}, {5: 4.0, 6: 6.0, 7: 5.0})
    assert row["ci"] == "unpaired" and row["n_pairs"] == 0 and row["ci_lo"] < 3.0 < row["ci_hi"]
    assert "no seed in common (baseline: seeds 0-2; other: seeds 5-7)" in row["note"] and "Welch" in row["note"]
    row = change({1: 1.0}, {7: 2.0})
    assert row["ci"] == "none" and math.isnan(row["ci_lo"]) and row["change"] == 1.0
    assert row["note"].startswith("no CI: no seed in common (baseline: seed 1; other: seed 7)")
    row = change({1: 1.0}, {1: 2.0})
    assert row["ci"] == "none" and "one seed in common" in row["note"]


def test_compare_groups_rows_and_attrs():
    g1 = Group("a", {"x": 1}, {s: {FA: {"grid_kwh": float(s), "policy": FA}} for s in range(3)})
    g2 = Group("b", {"x": 2}, {s: {FA: {"grid_kwh": s + 1.0}, "static": {"grid_kwh": 0.0}} for s in range(3)})
    df = compare_groups([g1, g2])
    assert list(df[["policy", "metric", "ci"]].itertuples(index=False, name=None)) == [(FA, "grid_kwh", "paired")]
    assert df["change"].iloc[0] == 1.0 and df["change_pct"].iloc[0] == pytest.approx(100.0)
    assert df.attrs["scenario_diff"] == {"b": [("x", 1, 2)]} and df.attrs["policies_missing"] == {"b": ["static"]}


# -- directories -----------------------------------------------------------------------------------

def test_compare_from_python_pairs_by_seed(cells):
    fast, slow = cells
    df = testbed.compare(fast, slow)
    assert df.attrs["scenario_diff"][str(slow)] == [("links[0].bandwidth_gbps", 10.0, 1.0),
                                                    ("traces.renewable.default.capacity_kw", 2.0, 1.0)]
    row = df[(df["policy"] == FA) & (df["metric"] == "grid_kwh")].iloc[0]
    assert row["ci"] == "paired" and row["n_pairs"] == 3 and "seed 5 only in the other" in row["note"]
    a = [testbed.open(fast / f"seed-{s}").summary.set_index("label").loc[FA, "grid_kwh"] for s in range(3)]
    b = [testbed.open(slow / f"seed-{s}").summary.set_index("label").loc[FA, "grid_kwh"] for s in range(3)]
    iv = t_interval(np.array(b) - np.array(a))
    assert (row["change"], row["ci_lo"], row["ci_hi"]) == pytest.approx((iv.mean, iv.lo, iv.hi), nan_ok=True)
    # two single runs of different seeds: no CI, and why
    one = testbed.compare(fast / "seed-0", slow / "seed-5", metrics=["grid_kwh"], policies=[FA])
    assert len(one) == 1 and one["ci"].iloc[0] == "none" and "no seed in common" in one["note"].iloc[0]


def test_cli_prints_the_scenario_diff_and_the_ci(cells, capsys):
    fast, slow = cells
    assert main(["compare", str(fast), str(slow), "--policy", FA, "--all"]) == 0
    out = capsys.readouterr().out
    assert f"A: {fast} (3 runs, seeds 0-2)" in out and f"B: {slow} (4 runs, seeds 0-2, 5)" in out
    assert "  links[0].bandwidth_gbps: 10 -> 1" in out and "  traces.renewable.default.capacity_kw: 2 -> 1" in out
    assert "paired (n=3)" in out and "grid_kwh" in out and "static" not in out.split("metrics, B vs A")[1]


def test_a_sweep_counts_one_side_per_cell(tmp_path):
    out = tmp_path / "sw"
    testbed.sweep(tiny_scenario(), out, grid={"links[0].bandwidth_gbps": [10, 1]}, seeds=range(2), parallel=1,
                  metrics=["grid_kwh"])
    df = testbed.compare(out, metrics=["grid_kwh"])
    [(other, diff)] = df.attrs["scenario_diff"].items()
    assert other.startswith(f"{out} [001-") and diff == [("links[0].bandwidth_gbps", 10.0, 1.0)]
    assert set(df["ci"]) == {"paired"} and set(df["n_pairs"]) == {2}
    cell = sorted((out / "trials").iterdir())[0]  # a cell's folder is a side too
    assert len(testbed.compare(cell, out, metrics=["grid_kwh"]).attrs["scenario_diff"]) == 2


def test_paths_that_hold_no_results_are_named(tmp_path, capsys, cells):
    fast, _ = cells
    (tmp_path / "empty").mkdir()
    (tmp_path / "file").write_text("x")
    code = main(["compare", str(fast), str(tmp_path / "empty"), str(tmp_path / "nowhere"), str(tmp_path / "file")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == [
        f"error: {tmp_path / 'empty'}: not a results directory (no manifest.json of a run, no sweep.json of a sweep)",
        f"error: {tmp_path / 'nowhere'}: no such directory",
        f"error: {tmp_path / 'file'}: not a results directory (no manifest.json of a run, no sweep.json of a sweep): "
        "not a directory",
    ]
    assert main(["compare", str(fast / "seed-0")]) == 2
    assert "give a second results directory" in capsys.readouterr().err
    with pytest.raises(SpecError) as e:
        testbed.compare(tmp_path / "empty", fast)
    assert e.value.problems[0][0] == str(tmp_path / "empty")
    with pytest.raises(SpecError, match="did you mean grid_kwh"):
        testbed.compare(fast / "seed-0", fast / "seed-1", metrics=["grid_kwhh"])
    assert main(["compare", str(fast / "seed-0"), str(fast / "seed-1"), "--policy", "feasibility_awar"]) == 2
    assert f"did you mean {FA}" in capsys.readouterr().err


def test_compare_is_a_command_with_help(capsys):
    assert main(["--help"]) == 0  # argparse formats help texts with %: a bare "95 % CI" would break --help
    assert "compare" in capsys.readouterr().out
    assert main(["compare", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--metric NAME" in out and "--policy LABEL" in out and "the first is the baseline" in out
