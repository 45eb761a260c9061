"""The migration-time error split into Eq. 1's terms, and the calibrated predictor beside Eq. 1."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from testbed.analysis import calibrated_predictor as cp
from testbed.analysis import error_terms as et
from testbed.cli import main
from testbed.feasibility import TCP_EFFICIENCY_MTU1500
from tests.conftest import ROOT


def _emulated(rows: list[dict]) -> pd.DataFrame:
    """Completed emulated migrations, every phase measured (actual_*), none modelled."""
    base = {"status": "completed", "substrate": "netns", "label": "feasibility_aware", "seed": 1, "run": 0,
            "predicted_load_s": 10.3, "predicted_downtime_s": 0.4, "start_lag_s": 0.0,
            "model_checkpoint_s": np.nan, "model_transfer_s": np.nan, "model_load_s": np.nan,
            "model_downtime_s": np.nan, "model_total_s": np.nan}
    df = pd.DataFrame([{**base, **r} for r in rows])
    phases = ["actual_checkpoint_s", "actual_transfer_s", "actual_load_s", "actual_downtime_s"]
    df["actual_total_s"] = df[phases].sum(axis=1)
    return df


def test_terms_add_up_to_the_total_error_and_a_checkpoint_write_shows_in_its_term():
    m = _emulated([
        {"checkpoint_gb": 40.0, "predicted_bandwidth_gbps": 10.0, "actual_checkpoint_s": 100.0,
         "actual_transfer_s": 33.0, "actual_load_s": 25.0, "actual_downtime_s": 0.9, "start_lag_s": 2.5},
        {"checkpoint_gb": 8.0, "predicted_bandwidth_gbps": 1.0, "actual_checkpoint_s": 3.0,
         "actual_transfer_s": 70.0, "actual_load_s": 9.0, "actual_downtime_s": 0.4, "start_lag_s": 0.0},
    ])
    e = et.term_errors(m)
    assert len(e) == 2
    # the total error is (realised total + start lag) - Eq. 1's total, and the terms add up to it
    pred_total = 8.0 * m["checkpoint_gb"] / m["predicted_bandwidth_gbps"] + 10.3 + 0.4
    expected = m["actual_total_s"] + m["start_lag_s"] - pred_total
    assert np.allclose(e["err_total_s"], expected)
    parts = e[[f"err_{t}_s" for t in et.TERMS]].sum(axis=1)
    assert np.allclose(parts, e["err_total_s"])
    assert (e["err_other_s"] == 0).all()
    first = e.iloc[0]
    assert first["err_checkpoint_s"] == pytest.approx(100.0)  # Eq. 1 predicts no checkpoint write
    assert first["err_transfer_s"] == pytest.approx(33.0 - 32.0)
    assert first["err_load_s"] == pytest.approx(25.0 - 10.3)
    assert first["err_downtime_s"] == pytest.approx(0.5)
    assert first["err_control_s"] == pytest.approx(2.5)
    # the write dominates this migration's error budget, and the shares sum to 1
    assert first["share_checkpoint"] > 0.8
    shares = e[[f"share_{t}" for t in (*et.TERMS, "other")]].sum(axis=1)
    assert np.allclose(shares, 1.0)
    assert set(first[[f"basis_{t}" for t in et.TERMS]]) == {et.MEASURED}


def test_sim_rows_are_labelled_modelled_and_have_no_control_delay():
    m = pd.DataFrame([{"status": "completed", "substrate": "sim", "label": "no_filter", "seed": 3, "run": 0,
                       "checkpoint_gb": 120.0, "predicted_bandwidth_gbps": 5.0, "predicted_load_s": 10.3,
                       "predicted_downtime_s": 0.4, "start_lag_s": 0.0, "actual_checkpoint_s": np.nan,
                       "actual_transfer_s": np.nan, "actual_load_s": np.nan, "actual_downtime_s": np.nan,
                       "actual_total_s": np.nan, "model_checkpoint_s": 60.0, "model_transfer_s": 210.0,
                       "model_load_s": 80.0, "model_downtime_s": 0.4, "model_total_s": 350.4},
                      {"status": "failed", "substrate": "sim", "label": "no_filter", "seed": 3, "run": 0,
                       "checkpoint_gb": 8.0, "predicted_bandwidth_gbps": 5.0, "predicted_load_s": 10.3,
                       "predicted_downtime_s": 0.4, "start_lag_s": np.nan, "model_total_s": np.nan}])
    e = et.term_errors(m)
    assert len(e) == 1  # only completed migrations
    row = e.iloc[0]
    assert row["basis_transfer"] == et.MODELLED and row["basis_checkpoint"] == et.MODELLED
    assert row["basis_control"] == et.NONE  # the sim has no control plane: 0 by construction
    assert row["err_total_s"] == pytest.approx(350.4 - (192.0 + 10.7))
    table = et.term_table(e)
    assert "measured" not in " ".join(table["basis"])
    assert table.loc[table["term"] == "checkpoint write", "median_err_s"].item() == pytest.approx(60.0)


def test_a_checkpoint_phase_without_a_column_is_what_the_total_holds_beyond_the_other_phases():
    m = _emulated([{"checkpoint_gb": 40.0, "predicted_bandwidth_gbps": 10.0, "actual_checkpoint_s": 0.0,
                    "actual_transfer_s": 33.0, "actual_load_s": 25.0, "actual_downtime_s": 0.9}])
    m["actual_total_s"] += 12.0  # a write the outcome's total holds, recorded in no column of its own
    m["actual_checkpoint_s"] = np.nan
    e = et.term_errors(m)
    assert e["err_checkpoint_s"].item() == pytest.approx(12.0)
    assert e["basis_checkpoint"].item() == "in the total (no column)"
    assert e["err_other_s"].item() == 0.0


def test_a_phase_with_no_value_is_not_recorded_rather_than_zero():
    m = _emulated([{"checkpoint_gb": 10.0, "predicted_bandwidth_gbps": 1.0, "actual_checkpoint_s": np.nan,
                    "actual_transfer_s": 90.0, "actual_load_s": np.nan, "actual_downtime_s": np.nan}])
    m["actual_total_s"] = 100.7
    e = et.term_errors(m)
    assert e["basis_load"].item() == et.MISSING and np.isnan(e["err_load_s"].item())
    assert np.isnan(e["err_checkpoint_s"].item())  # the total minus unknown phases says nothing
    assert e["err_total_s"].item() == pytest.approx(100.7 - (80.0 + 10.7))  # the total error is still known
    table = et.term_table(e).set_index("term")
    assert table.loc["load", "n"] == 0 and table.loc["transfer", "n"] == 1 and table.loc["total", "n"] == 1


def test_term_table_medians_and_p90_per_substrate():
    rows = [{"checkpoint_gb": 10.0, "predicted_bandwidth_gbps": 8.0, "actual_checkpoint_s": float(c),
             "actual_transfer_s": 10.0, "actual_load_s": 10.3, "actual_downtime_s": 0.4} for c in range(1, 11)]
    e = et.term_errors(_emulated(rows))
    t = et.term_table(e).set_index("term")
    assert t.loc["checkpoint write", "n"] == 10
    assert t.loc["checkpoint write", "median_err_s"] == pytest.approx(5.5)
    assert t.loc["checkpoint write", "p90_err_s"] == pytest.approx(np.quantile(np.arange(1, 11), 0.9))
    assert t.loc["load", "median_err_s"] == pytest.approx(0.0)
    assert t.loc["checkpoint write", "median_share"] == pytest.approx(1.0)  # the only term that is off
    assert t.loc["total", "median_err_s"] == pytest.approx(5.5)


def test_markdown_writes_the_figure(tmp_path):
    m = _emulated([{"checkpoint_gb": 40.0, "predicted_bandwidth_gbps": 10.0, "actual_checkpoint_s": 100.0,
                    "actual_transfer_s": 33.0, "actual_load_s": 25.0, "actual_downtime_s": 0.9}])
    lines = et.markdown(m, tmp_path)
    text = "\n".join(lines)
    assert "term by term" in text and "checkpoint write" in text and "error_terms.png" in text
    assert (tmp_path / "error_terms.png").stat().st_size > 10_000


# -- the calibrated predictor ----------------------------------------------------------------------
class LineIoModel:
    """A stand-in for testbed.io_model.IoModel: ``.mean(size_gb)`` -> (checkpoint_s, load_s, downtime_s)."""

    def mean(self, size_gb: float) -> tuple[float, float, float]:
        return 2.0 + 1.5 * size_gb, 1.0 + 0.7 * size_gb, 0.4


def _following_the_model(substrate: str, seeds=(1, 2, 3, 4, 5), noise: float = 0.05) -> pd.DataFrame:
    """Migrations whose measured phases follow LineIoModel (times a little noise) and whose transfer
    is the TCP-corrected 8S/B."""
    rng = np.random.default_rng(0)
    rows, model = [], LineIoModel()
    for seed in seeds:
        for size in (8.0, 40.0, 120.0, 260.0):
            ck, ld, dt = (x * (1 + noise * rng.standard_normal()) for x in model.mean(size))
            tr = 8.0 * size / (10.0 * TCP_EFFICIENCY_MTU1500)
            rows.append({"status": "completed", "substrate": substrate, "seed": seed, "checkpoint_gb": size,
                         "predicted_bandwidth_gbps": 10.0, "predicted_load_s": 10.3, "predicted_downtime_s": 0.4,
                         "actual_checkpoint_s": ck, "actual_transfer_s": tr, "actual_load_s": ld,
                         "actual_downtime_s": dt, "actual_total_s": ck + tr + ld + dt})
    return pd.DataFrame(rows)


def test_the_calibrated_predictor_beats_eq1_when_the_data_follow_the_model():
    m = _following_the_model("netns")
    p = cp.predictions(m, LineIoModel())
    assert len(p) == len(m)
    row = p.iloc[0]
    assert row["predicted_total_calibrated_s"] == pytest.approx(
        8.0 * 8.0 / (10.0 * TCP_EFFICIENCY_MTU1500) + sum(LineIoModel().mean(8.0)))
    assert row["predicted_total_eq1_s"] == pytest.approx(8.0 * 8.0 / (10.0 * TCP_EFFICIENCY_MTU1500) + 10.7)
    assert p["abs_rel_err_calibrated"].median() < 0.1 < p["abs_rel_err_eq1"].median()
    table = cp.comparison(p)
    assert list(table["substrate"]) == ["netns"] and table["seeds"].item() == 5
    assert table["truth"].item() == "measured"
    assert table["paired_t_p"].item() < 0.05
    eq1 = float(table["eq1_median_abs_err_pct"].item().split()[0])
    cal = float(table["calibrated_median_abs_err_pct"].item().split()[0])
    assert cal < eq1


def test_the_calibrated_predictor_is_no_better_when_the_data_follow_eq1():
    """The comparison can come out against the calibrated predictor: data that follow Eq. 1's
    constants (no write, constant load) are predicted better by Eq. 1."""
    m = _following_the_model("netns", noise=0.0)
    m["actual_checkpoint_s"] = 0.0
    m["actual_load_s"], m["actual_downtime_s"] = 10.3, 0.4
    m["actual_total_s"] = m["actual_transfer_s"] + 10.7
    p = cp.predictions(m, LineIoModel())
    assert p["abs_err_eq1_s"].max() == pytest.approx(0.0, abs=1e-9)
    assert (p["abs_err_calibrated_s"] > 1.0).all()


def test_the_sim_rows_are_said_not_to_be_evidence():
    m = pd.concat([_following_the_model("sim"), _following_the_model("netns")], ignore_index=True)
    sim = m["substrate"] == "sim"
    for phase in ("checkpoint", "transfer", "load", "downtime", "total"):  # the sim's outcome is modelled
        m.loc[sim, f"model_{phase}_s"] = m.loc[sim, f"actual_{phase}_s"]
        m.loc[sim, f"actual_{phase}_s"] = np.nan
    text = "\n".join(cp.markdown(m, LineIoModel()))
    assert "| sim | modelled (sim) |" in text and "| netns | measured |" in text
    assert "not evidence for the calibrated predictor; the emulated rows (measured) are" in text


def test_without_an_io_model_the_report_says_so(monkeypatch):
    monkeypatch.setattr(cp, "default_model", lambda downtime_s: (None, "testbed/io_model.py is not in this tree"))
    lines = cp.markdown(_following_the_model("netns"))
    assert any(cp.NO_MODEL in line for line in lines)
    assert not any(line.startswith("| substrate") for line in lines)


# -- end to end ------------------------------------------------------------------------------------
def test_report_over_a_sim_run_writes_the_error_term_and_calibrated_sections(tmp_path):
    run = tmp_path / "run"
    assert main(["run", str(ROOT / "scenarios" / "sweep-small.yaml"), "--substrate", "sim", "--out", str(run),
                 "--no-progress", "--no-plots"]) == 0
    assert main(["report", str(run), "--out", str(tmp_path / "rep")]) == 0
    text = (tmp_path / "rep" / "report.md").read_text()
    assert "## Migration-time error, term by term" in text
    assert "| sim | transfer | modelled |" in text
    assert "## Eq. 1 vs a calibrated predictor of the total migration time" in text
    assert "| sim | modelled (sim) |" in text or cp.NO_MODEL in text
    assert (tmp_path / "rep" / "error_terms.png").stat().st_size > 10_000
    assert "## The alpha trade-off" not in text  # a single run sweeps nothing


def test_sim_vs_emulation_gap_per_phase_pairs_cells_and_seeds():
    import pandas as pd

    from testbed.analysis.error_terms import sim_emulation_gap

    rows = []
    for sub, ck, load in (("sim", 100.0, 30.0), ("netns", 160.0, 45.0)):
        for seed in (1, 2):
            rows.append({"substrate": sub, "cell": "c", "seed": seed, "label": "fa", "status": "completed",
                         f"{'model' if sub == 'sim' else 'actual'}_checkpoint_s": ck,
                         f"{'model' if sub == 'sim' else 'actual'}_load_s": load})
    rows.append({"substrate": "netns", "cell": "other", "seed": 9, "label": "fa", "status": "completed",
                 "actual_checkpoint_s": 1e6, "actual_load_s": 1e6})  # no sim twin: left out
    g = sim_emulation_gap(pd.DataFrame(rows)).set_index("phase")
    assert g.loc["checkpoint", "gap s"] == 60.0 and g.loc["load", "gap %"] == 50.0
    assert g.loc["checkpoint", "pairs of runs"] == 2
    assert sim_emulation_gap(pd.DataFrame(rows).query("substrate == 'sim'")).empty
