"""The report's section "Prediction error and overruns by predictor and load" (issue #33), on synthetic
migrations: medians over seeds, the mean's 95 % CI, and the heavy-load verdict either way."""

from __future__ import annotations

import pandas as pd
import pytest

from testbed.analysis import cross_traffic_report as xr
from testbed.stats import t_interval


def migrations(err: dict[tuple[str, str], list[float]], overran: dict[tuple[str, str], list[int]] | None = None,
               moves: int = 3) -> pd.DataFrame:
    """``moves`` completed moves per (load, basis) and seed, each with |error| err[(load, basis)][seed]
    (predicted = (1 + err) x actual), the first ``overran[...][seed]`` of them overran; one failed move
    per run that must not count."""
    rows = []
    for (load, basis), per_seed in err.items():
        for seed, e in enumerate(per_seed):
            for i in range(moves):
                over = overran is not None and i < overran[(load, basis)][seed]
                rows.append({"substrate": "sim", "param_cross_traffic": load, "predicted_bandwidth_basis": basis,
                             "run": f"{load}-{seed}", "label": basis, "seed": seed, "status": "completed",
                             "predicted_transfer_s": 100.0 * (1 + e), "outcome_transfer_s": 100.0, "overran": over})
            rows.append({"substrate": "sim", "param_cross_traffic": load, "predicted_bandwidth_basis": basis,
                         "run": f"{load}-{seed}", "label": basis, "seed": seed, "status": "failed",
                         "predicted_transfer_s": 1.0, "outcome_transfer_s": None, "overran": True})
    return pd.DataFrame(rows)


ERR = {("none", "nominal"): [0.05, 0.06, 0.07], ("none", "probe"): [0.06, 0.06, 0.08],
       ("heavy", "nominal"): [0.7, 0.8, 0.9], ("heavy", "probe"): [0.05, 0.1, 0.5]}


def test_the_table_has_medians_over_seeds_and_the_means_ci():
    over = {k: [1, 0, 2] for k in ERR}
    t = xr.table(xr.per_run(migrations(ERR, over)))
    assert list(zip(t["load"], t["predictor"])) == [("none", "nominal"), ("none", "probe"),
                                                    ("heavy", "nominal"), ("heavy", "probe")]
    row = t[(t["load"] == "heavy") & (t["predictor"] == "probe")].iloc[0]
    assert row["seeds"] == 3 and row["moves"] == 9  # the failed moves left out
    assert row["median_abs_err"] == pytest.approx(0.1)
    ci = t_interval([0.05, 0.1, 0.5])
    assert row["mean_abs_err"] == pytest.approx(ci.mean)
    assert row["abs_err_ci95"] == f"[{ci.lo:.3g}, {ci.hi:.3g}]"
    assert row["median_overruns"] == 1 and row["overrun_share"] == pytest.approx(3 / 9)


TEN = {("none", "nominal"): [0.05 + 0.01 * i for i in range(10)], ("none", "probe"): [0.06] * 10,
       ("heavy", "nominal"): [0.7 + 0.02 * i for i in range(10)], ("heavy", "probe"): [0.05 + 0.03 * i for i in range(10)]}


def test_the_verdict_says_yes_when_probe_beats_nominal_under_heavy_load_over_ten_seeds():
    lines = xr.markdown(migrations(TEN))
    assert lines[0] == "## Prediction error and overruns by predictor and load"
    text = "\n".join(lines)
    assert "**yes, `probe` beats `nominal` under heavy load**" in text and "0.185 (`probe`) against 0.79" in text
    assert "paired over 10 seeds" in text


def test_the_verdict_says_plainly_when_probe_does_not_beat_nominal():
    worse = {**TEN, ("heavy", "probe"): [0.9 + 0.01 * i for i in range(10)]}
    text = "\n".join(xr.markdown(migrations(worse)))
    assert "**no, `probe` does not beat `nominal` under heavy load** (`probe` is worse)" in text and "yes," not in text
    # lower median but no significant paired difference: not a yes
    noisy = {**TEN, ("heavy", "probe"): [0.1, 1.5, 0.2, 1.4, 0.3, 1.6, 0.25, 1.3, 0.15, 0.2]}
    text = "\n".join(xr.markdown(migrations(noisy)))
    assert "**no, `probe` does not beat `nominal` under heavy load** (no significant difference)" in text
    assert "yes," not in text


def test_fewer_than_ten_paired_seeds_get_numbers_but_no_verdict():
    """Three seeds (the netns sweep's), however clear the gap: the numbers, and no yes or no."""
    text = "\n".join(xr.markdown(migrations(ERR)))
    assert "**not judged**, not enough seeds (n=3<10) paired" in text and "0.1 (`probe`) against 0.8" in text
    assert "yes," not in text and "**no," not in text


def test_no_section_without_bases_or_loads_and_no_verdict_without_heavy_load():
    one = {("none", "nominal"): [0.1, 0.2]}
    assert xr.markdown(migrations(one)) == []
    light = {("light", "nominal"): [0.5], ("light", "probe"): [0.1]}
    assert "not judged: no completed heavy-load move by `nominal` and `probe`" in "\n".join(xr.markdown(migrations(light)))
    refused = {("none", "nominal"): [0.1, 0.1], ("heavy", "nominal"): [0.8, 0.9]}  # probe moved nothing
    text = "\n".join(xr.markdown(migrations(refused, {("none", "nominal"): [0, 0], ("heavy", "nominal"): [3, 1]})))
    assert "not judged: no completed heavy-load move by `probe`" in text and "`nominal` made 6 and 4 overran" in text


def test_other_runs_are_left_out_and_scenarios_pool_apart():
    m = migrations(ERR)
    other = migrations({("none", "nominal"): [0.3]}).assign(param_cross_traffic=None, run="other")
    assert "other" not in set(xr.per_run(pd.concat([m, other], ignore_index=True))["run"])
    scen = {r: ("a" if r.endswith("-0") else "b") for r in m["run"].unique()}
    t = xr.table(xr.per_run(m, scen))
    assert dict(zip(zip(t["scenario"], t["load"], t["predictor"]), t["seeds"]))[("b", "heavy", "probe")] == 2
    text = "\n".join(xr.markdown(m, scen))
    assert "- a on sim: **not judged**, not enough seeds (n=1<10)" in text
    assert "- b on sim: **not judged**, not enough seeds (n=2<10)" in text


def twin_moves(ratios: dict[str, list[list[float]]]) -> pd.DataFrame:
    """For each load, seed and move: one move on sim (100 s) and the same move on netns (100 x ratio s),
    plus a move only netns made, and a failed one, that must not count."""
    rows = []
    for load, per_seed in ratios.items():
        for seed, rs in enumerate(per_seed):
            for i, r in enumerate(rs):
                common = {"param_cross_traffic": load, "predicted_bandwidth_basis": "fair_share", "label": "fair_share",
                          "seed": seed, "status": "completed", "job_id": f"j{i}", "src": "a", "dst": "b",
                          "t_decision_s": 3600.0 * (i + 1), "predicted_transfer_s": 100.0, "overran": False}
                rows.append({**common, "substrate": "sim", "run": f"sim-{load}-{seed}", "outcome_transfer_s": 100.0})
                rows.append({**common, "substrate": "netns", "run": f"netns-{load}-{seed}",
                             "outcome_transfer_s": 100.0 * r, "actual_transfer_s": 100.0 * r})
            only = {**common, "substrate": "netns", "run": f"netns-{load}-{seed}", "t_decision_s": 99.0,
                    "outcome_transfer_s": 900.0, "actual_transfer_s": 900.0}
            rows += [only, {**only, "t_decision_s": 3600.0, "status": "failed"}]
    return pd.DataFrame(rows)


def test_the_sim_emulation_gap_by_load_pairs_the_same_moves():
    m = twin_moves({"none": [[1.0, 1.02], [1.04], [1.0]], "heavy": [[1.1, 1.3], [1.2], [1.5]]})
    gap = xr.transfer_gap(m)
    assert list(gap["load"]) == ["none", "heavy"] and set(gap["substrate"]) == {"netns"}
    heavy = gap[gap["load"] == "heavy"].iloc[0]
    assert heavy["moves"] == 4 and heavy["seeds"] == 3  # the move only netns made, and the failed one, left out
    assert heavy["median_ratio"] == pytest.approx(1.25) and heavy["max_ratio"] == pytest.approx(1.5)
    ci = t_interval([1.2, 1.2, 1.5])  # each seed's median ratio
    assert heavy["mean_seed_ratio"] == pytest.approx(ci.mean)
    assert heavy["seed_ratio_ci95"] == f"[{ci.lo:.3g}, {ci.hi:.3g}]"
    text = "\n".join(xr.markdown(m))
    assert "Sim vs emulation under cross-traffic" in text and "| netns | heavy | 3 | 4 |" in text
    # without a sim twin there is no gap to report
    assert xr.transfer_gap(m[m["substrate"] == "netns"]).empty
    assert "Sim vs emulation under cross-traffic" not in "\n".join(xr.markdown(m[m["substrate"] == "netns"]))
