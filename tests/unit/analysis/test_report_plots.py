"""The report's figures: names, labels and the normalised phase diagram's arithmetic."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from testbed.analysis import validation as v
from testbed.analysis.names import param_column
from testbed.analysis.params import axis_label, fields_of, file_stem
from testbed.analysis.phase_diagram import plot_normalised_phase, quadrant_counts


def run(params: dict, overrides: dict) -> v.Run:
    return v.Run(Path("."), "sim", 0, "s", "c", params, {}, overrides)


EVENTS = [{"link": "*", "start_h": 1.5, "duration_h": 1.0, "degradation_pct": 20},
          {"link": "*", "start_h": 4.5, "duration_h": 1.0, "degradation_pct": 20}]


def test_a_sweep_variable_is_labelled_by_the_fields_it_sets():
    runs = [run({"$deg": 20, "variant": "steady"}, {"traces.bandwidth.steady_degradation_pct": 20}),
            run({"$deg": 20, "variant": "events"}, {"traces.bandwidth.events": EVENTS}),
            run({"$deg": 0, "variant": "events"}, {"traces.bandwidth.events": [dict(e, degradation_pct=0) for e in EVENTS]})]
    assert set(fields_of("param_deg", runs)) == {"traces.bandwidth.steady_degradation_pct",
                                                  "traces.bandwidth.events[].degradation_pct"}
    assert axis_label("param_deg", runs) == "bandwidth degradation (%)"
    for path in ("traces.forecast.window.noise_pct", "policies[fa-risk].epsilon", "workloads.gpu_count", "$x"):
        runs.append(run({path: 1}, {}))
    assert axis_label(param_column("traces.forecast.window.noise_pct"), runs) == "window forecast noise (%)"
    assert axis_label(param_column("policies[fa-risk].epsilon"), runs).startswith("risk budget")
    assert axis_label("param_workloads_gpu_count", runs) == "gpu count"
    assert axis_label("param_x", runs) == "x"  # nothing known: its own name, without the '$'


def test_file_names_carry_no_shell_characters():
    assert file_stem(param_column("$deg")) == "deg"
    assert file_stem(param_column("policies[fa-risk].alpha")) == "policies_fa_risk_alpha"
    assert file_stem(param_column("traces.bandwidth.steady_degradation_pct")) == "traces_bandwidth_steady_degradation_pct"


def test_every_parameter_column_is_an_identifier():
    for path in ("feasibility.alpha", "policies[fa-risk].alpha", "$deg", "variant", "links[0].bandwidth_gbps",
                 "traces.renewable.rome.capacity_kw"):
        c = param_column(path)
        assert c.isidentifier() and c.startswith("param_"), (path, c)
    assert param_column("links[0].bandwidth_gbps") == "param_links_0_bandwidth_gbps"


def test_normalised_quadrants_judge_each_migration_on_its_own_window():
    # predicted 50 s on a 1000 s budget (0.05) but actual 150 s on a true budget of 100 s (1.5): a miss,
    # whatever the median window of the other migrations is
    m = pd.DataFrame({"predicted_total_s": [50.0, 50.0, 500.0, 500.0, 50.0],
                      "predicted_budget_s": [1000.0, 1000.0, 100.0, 100.0, 1000.0],
                      "actual_total_s": [150.0, 60.0, 90.0, 900.0, np.nan],
                      "true_budget_s": [100.0, 1000.0, 100.0, 100.0, 1000.0],
                      "status": ["completed"] * 4 + ["unfinished"]})
    x = m["predicted_total_s"] / m["predicted_budget_s"]
    y = (m["actual_total_s"] / m["true_budget_s"]).where(m["status"] == "completed")
    assert quadrant_counts(x, y) == {(0, 0): 1, (0, 1): 2, (1, 0): 1, (1, 1): 1}


def test_normalised_phase_diagram_renders_and_names_missing_columns(tmp_path):
    m = pd.DataFrame({"predicted_total_s": [50.0, 500.0], "predicted_budget_s": [1000.0, 100.0],
                      "actual_total_s": [60.0, np.nan], "true_budget_s": [100.0, 100.0],
                      "status": ["completed", "unfinished"], "degradation_kind": ["none", "event"],
                      "substrate": ["sim", "netns"]})
    path = plot_normalised_phase(tmp_path / "p.png", m)
    assert path.stat().st_size > 20_000
    with pytest.raises(ValueError, match="true_budget_s"):
        plot_normalised_phase(tmp_path / "q.png", m.drop(columns="true_budget_s"))


def test_confusion_figure_keeps_to_a_few_panels(tmp_path):
    conf = pd.DataFrame({"g": [f"p{i}" for i in range(70)], "tp": 1, "fp": 0, "fn": 0, "tn": 1})
    from PIL import Image

    v.confusion_plot(conf, tmp_path / "c.png", "t", "g")
    with Image.open(tmp_path / "c.png") as im:
        w, h = im.size
    assert h < 1400 and w < 1600  # 12 panels at most (70 would be ~6000 px tall)


def test_report_shows_emulated_errors_with_and_without_contended_transfers(tmp_path, monkeypatch):
    from testbed.analysis import report

    rng = np.random.default_rng(0)
    n = 12
    m = pd.DataFrame({"substrate": "netns", "status": "completed", "label": "p", "run": 0, "src": "a", "dst": "b",
                      "checkpoint_gb": 10.0, "predicted_bandwidth_gbps": 1.0, "t_decision_s": np.arange(n) * 1e4,
                      "predicted_load_s": 10.3, "predicted_downtime_s": 0.4, "predicted_total_s": 100.0,
                      "predicted_budget_s": 1000.0, "true_budget_s": 1000.0, "predicted_window_s": 1e4,
                      "predicted_alpha": 0.1, "within_budget": True, "predicted_feasible": True,
                      "predicted_risk_feasible": None, "contended": [True] * 4 + [False] * 8,
                      "actual_transfer_s": 80 / 0.956 * rng.uniform(0.99, 1.01, n) * np.r_[[1.4] * 4, [1.0] * 8]})
    m["actual_total_s"] = m["actual_transfer_s"] + 10.7
    m = v.add_concurrency(v.add_predictions(m))
    sums = pd.DataFrame({"label": ["p"], "substrate": ["netns"], "policy": ["p"], "run": [0]})
    from testbed.analysis.report_data import ReportData

    data = ReportData(runs=[], sources=[], git=[], summaries=[], migrations=pd.DataFrame(), jobs=pd.DataFrame())
    report._write_report(data, m, sums, [], tmp_path, "t")
    text = (tmp_path / "report.md").read_text()
    want = {"contended host", "quiet host", "all without contended"}
    rows = {line.split("|")[2].strip(): line for line in text.splitlines()
            if line.startswith("| netns |") and line.split("|")[2].strip() in want}
    assert set(rows) == want
    assert "| 8 |" in rows["all without contended"] and "| 4 |" in rows["contended host"]


def test_by_level_plot_with_a_split_column_the_runs_do_not_have(tmp_path):
    # a sim sweep with variants reported together with a netns sweep without: the netns rows have no variant
    rows = []
    for run, (deg, variant) in enumerate([(0, None), (35, None), (0, "steady"), (35, "steady")]):
        for label, kwh in (("static", 100.0), ("feasibility_aware", 90.0 - deg / 10)):
            rows.append({"run": run, "label": label, "policy": label, "grid_kwh": kwh, "mean_jct_s": 10.0,
                         "param_x": deg, "param_variant": variant})
    sums = pd.DataFrame(rows)
    v.by_level_plot(sums, "param_x", tmp_path / "a.png", "t", split="param_variant", xlabel="x (%)")
    v.by_level_plot(sums[sums["param_variant"].isna()], "param_x", tmp_path / "b.png", "t", split="param_variant")
    assert (tmp_path / "a.png").stat().st_size > 20_000 and (tmp_path / "b.png").stat().st_size > 20_000
