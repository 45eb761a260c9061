"""testbed report: validation tables and figures from runs and sweeps (sim; no privileges)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml

from testbed.analysis import validation as v
from testbed.analysis.calibration import calibrate_transfer
from testbed.analysis.report import build_report, sim_vs_emulation
from testbed.cli import main
from testbed.analysis.outcomes import outcome_s
from tests.conftest import ROOT


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sw")
    sweep = {"name": "rep", "scenario": str(ROOT / "scenarios" / "sweep-small.yaml"), "seeds": [0, 1],
             "grid": {"traces.bandwidth.steady_degradation_pct": [0, 50]}}
    f = tmp / "s.yaml"
    f.write_text(yaml.safe_dump(sweep))
    assert main(["sweep", str(f), "--out", str(tmp / "out"), "--parallel", "1"]) == 0
    return tmp / "out"


def test_report_from_a_sweep(sweep_dir, tmp_path):
    runs = v.find_runs(sweep_dir)
    assert len(runs) == 4 and {r.substrate for r in runs} == {"sim"}
    m, sums = v.gather(runs)
    assert len(m) > 0 and set(sums["label"]) == {"static", "energy_only", "feasibility_aware", "no_filter"}
    # the relative errors are what they say
    done = m[m["status"] == "completed"]
    row = done.iloc[0]
    realised = outcome_s(done, "transfer").iloc[0]  # sim: the modelled transfer (model_transfer_s)
    assert row["err_transfer_plain"] == pytest.approx(
        (8 * row["checkpoint_gb"] / row["predicted_bandwidth_gbps"] - realised) / realised)
    # 50 % steady degradation: the nominal-bandwidth predictions are about twice too fast
    deg = done[done["param_traces_bandwidth_steady_degradation_pct"] == 50]
    assert deg["err_transfer_corrected"].median() < -0.4
    conf = v.confusion(m, ["label"])
    assert conf["n"].sum() == len(m) and (conf[["tp", "fp", "fn", "tn"]].sum(axis=1) == conf["n"]).all()
    path = build_report([sweep_dir], tmp_path / "rep")
    text = path.read_text()
    for section in ("Predicted vs actual", "Predicted feasible vs completed within budget", "at each level",
                    "Phase diagram", "claims, measured"):
        assert section in text
    for png in ("pred_vs_actual.png", "error_cdf.png", "confusion.png", "phase_diagram.png",
                "by_level_traces_bandwidth_steady_degradation_pct.png"):
        assert (tmp_path / "rep" / png).stat().st_size > 10_000, png
    assert "Sim vs emulation" not in text  # only sim runs here
    problems = _report_files_against_the_document(tmp_path / "rep")
    assert not problems, "\n".join(problems)


def _report_files_against_the_document(rep) -> list[str]:
    """report.json, summaries.csv and migrations.parquet against docs/outputs.md (the report's
    migrations: every column of a run's migrations.parquet, then the report's own)."""
    from tests.unit import outputs_schema as schema

    _, files = schema.load()
    summary_keys = files["migration:<policy>/summary.json"]
    columns = list(pd.read_csv(rep / "summaries.csv").columns)
    params = {c: "<param:path>" for c in columns if c.startswith("param_")}
    assert params, "the sweep's parameter columns are in the report's tables"
    keys = {c: "<summary key>" for c in columns if c in summary_keys and c not in files["summaries.csv"]}
    migrations = {**files["<policy>/migrations.parquet"], **files["migrations.parquet"]}
    return (schema.problems(rep / "report.json", "report.json", None, files)
            + schema.problems(rep / "summaries.csv", "summaries.csv", None, files, {**params, **keys})
            + schema.problems(rep / "migrations.parquet", "migrations.parquet", None,
                              {**files, "migrations.parquet": migrations}, params))


def test_report_refuses_what_is_not_a_run(tmp_path, capsys):
    (tmp_path / "x").mkdir()
    assert main(["report", str(tmp_path / "x")]) != 0
    assert "neither a run" in capsys.readouterr().err


def test_sim_vs_emulation_pairs_runs_by_cell_seed_and_policy():
    sums = pd.DataFrame([
        {"substrate": "sim", "cell": "", "seed": 1, "label": "static", "grid_kwh": 10.0, "mean_jct_s": 5.0},
        {"substrate": "netns", "cell": "", "seed": 1, "label": "static", "grid_kwh": 11.0, "mean_jct_s": 5.0},
        {"substrate": "netns", "cell": "", "seed": 2, "label": "static", "grid_kwh": 99.0, "mean_jct_s": 9.0},
    ])
    d = sim_vs_emulation(sums).set_index("metric")
    assert d.loc["grid_kwh", "diff %"] == pytest.approx(10.0)
    assert d.loc["grid_kwh", "pairs"] == 1 and d.loc["mean_jct_s", "diff"] == 0
    assert d.loc["grid_kwh", "sim"] == 10.0 and d.loc["grid_kwh", "emulated"] == 11.0


def test_transfer_calibration_recovers_efficiency_and_ramp():
    rng = np.random.default_rng(0)
    plain = rng.uniform(20, 400, 30)
    m = pd.DataFrame({"substrate": "netns", "status": "completed", "predicted_transfer_plain_s": plain,
                      "actual_transfer_s": plain / 0.95 + 3.0})
    cal = calibrate_transfer(m)
    assert cal["protocol_efficiency"] == pytest.approx(0.95, rel=1e-6) and cal["ramp_s"] == pytest.approx(3.0, abs=1e-6)
    assert calibrate_transfer(m.assign(substrate="sim")) is None
