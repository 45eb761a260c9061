"""The migration record: measured phases are ``actual_*``, modelled ones ``model_*``; the control
plane's delay and the host's load are recorded beside the phases, never in them."""

from __future__ import annotations

import pandas as pd
import pytest

from testbed.analysis.outcomes import outcome_s
from testbed.controller.records import MIGRATION_COLUMNS, MigrationRecord
from testbed.feasibility import assess
from testbed.spec import scenario_from_dict
from testbed.substrate.base import HostLoadSample, MigrationOrder, MigrationOutcome
from tests.conftest import run_policies, small_scenario_dict

ORDER = MigrationOrder("j1", "a", "b", 40.0, 3600.0)


def _record() -> MigrationRecord:
    return MigrationRecord(policy="p", job_id="j1", family="m", src="a", dst="b", checkpoint_gb=40.0, t_decision_s=3600.0,
                           reason="r", predicted=assess(40.0, 10.0, 7200.0), true_window_s=7200.0,
                           true_budget_s=720.0)


def _emulated(**kw) -> MigrationOutcome:
    base = dict(order=ORDER, status="completed", checkpoint_s=30.0, transfer_s=330.0, load_s=25.0, downtime_s=0.01,
                goodput_gbps=0.97, phases_measured=("checkpoint", "transfer", "load", "downtime"), start_lag_s=12.0,
                control_wall_s=0.2, io_bytes=40_000_000, save_bytes_per_s=1.3e9, load_bytes_per_s=1.6e9,
                host_load=HostLoadSample(1.9, 0.2, 1.7, 0.0, True))
    base.update(kw)
    return MigrationOutcome(**base)


def test_a_measured_outcome_fills_actual_and_outcome_columns():
    rec = _record()
    rec.finish(_emulated())
    row = rec.row()
    assert set(row) == set(MIGRATION_COLUMNS)
    assert (row["actual_checkpoint_s"], row["actual_transfer_s"], row["actual_load_s"], row["actual_downtime_s"]) == (
        30.0, 330.0, 25.0, 0.01)
    assert row["actual_total_s"] == pytest.approx(385.01)  # the start lag is in no phase and not in the total
    assert not any(c.startswith("model_") for c in MIGRATION_COLUMNS)  # one name: outcome_*, its basis beside
    assert row["outcome_basis"] == "measured"
    assert all(row[f"outcome_{q}"] == row[f"actual_{q}"] for q in (
        "checkpoint_s", "transfer_s", "load_s", "downtime_s", "total_s", "goodput_gbps"))
    assert (row["start_lag_s"], row["control_s"], row["measured_io_bytes"]) == (12.0, 0.2, 40_000_000)
    assert (row["save_mb_per_s"], row["load_mb_per_s"]) == (pytest.approx(1300.0), pytest.approx(1600.0))
    assert (row["host_cpu_cores"], row["own_cpu_cores"], row["other_cpu_cores"], row["contended"]) == (1.9, 0.2, 1.7, True)
    assert row["within_budget"] is True and row["overran"] is False  # 385 s < 720 s


def test_a_modelled_outcome_fills_outcome_columns_only():
    rec = _record()
    rec.finish(MigrationOutcome(order=ORDER, status="completed", transfer_s=340.0, load_s=10.3, downtime_s=0.4,
                                goodput_gbps=0.94))
    row = rec.row()
    assert all(row[c] is None for c in MIGRATION_COLUMNS if c.startswith("actual_"))
    assert (row["outcome_transfer_s"], row["outcome_load_s"], row["outcome_downtime_s"]) == (340.0, 10.3, 0.4)
    assert row["outcome_total_s"] == pytest.approx(350.7) and row["outcome_goodput_gbps"] == 0.94
    assert row["outcome_basis"] == "modelled"
    assert row["contended"] is None and row["host_cpu_cores"] is None


def test_a_partly_measured_outcome_has_a_modelled_total():
    rec = _record()
    rec.finish(_emulated(phases_measured=("transfer",)))
    row = rec.row()
    assert row["actual_transfer_s"] == 330.0 and row["actual_load_s"] is None and row["outcome_load_s"] == 25.0
    assert row["actual_total_s"] is None and row["outcome_total_s"] == pytest.approx(385.01)
    assert row["outcome_basis"] == "partly measured"


def test_resume_includes_the_start_lag_and_never_precedes_the_floor():
    out = _emulated()
    assert out.resume_s == pytest.approx(3600.0 + 12.0 + 385.01)
    assert _emulated(resume_floor_s=5000.0).resume_s == 5000.0


def test_outcome_s_reads_the_outcome_and_older_columns():
    assert list(outcome_s(pd.DataFrame({"outcome_total_s": [400.0, 350.0]}), "total")) == [400.0, 350.0]
    m = pd.DataFrame({"actual_total_s": [400.0, None], "model_total_s": [None, 350.0]})  # written before outcome_*
    assert list(outcome_s(m, "total")) == [400.0, 350.0]
    assert outcome_s(pd.DataFrame({"model_load_s": [10.3]}), "load").tolist() == [10.3]
    assert outcome_s(pd.DataFrame({"x": [1]}), "load").isna().all()


def test_a_sim_run_has_no_actual_column_with_a_value():
    d = small_scenario_dict(duration_h=72)
    d["workloads"] = {"arrivals": {"jobs_per_day": 12, "until_h": 48},
                      "mix": [{"family": "m", "checkpoint_gb": 20, "work_gpu_h": [4, 12]},
                              {"family": "n", "checkpoint_gb": 24, "work_gpu_h": [4, 12]}]}
    m = run_policies(scenario_from_dict(d))["energy_only"]["migrations"]
    done = m[m["status"] == "completed"]
    assert done["checkpoint_gb"].nunique() == 2, "needs migrations of both sizes"
    assert done.filter(like="actual_").isna().all().all()
    assert done["outcome_transfer_s"].nunique() > 1 and done["outcome_total_s"].notna().all()
    assert (done["outcome_basis"] == "modelled").all()
    assert done["contended"].isna().all() and done["start_lag_s"].eq(0.0).all()


def test_migrations_written_before_outcome_columns_read_as_today():
    from testbed.analysis.names import current_columns

    old = pd.DataFrame({"status": ["completed", "completed", "failed"],
                        "actual_total_s": [400.0, None, None], "actual_load_s": [20.0, None, None],
                        "model_total_s": [None, 350.0, None], "model_load_s": [None, 10.3, None]})
    m = current_columns("migrations", old)
    assert not any(c.startswith("model_") for c in m.columns)
    assert m["outcome_total_s"].tolist()[:2] == [400.0, 350.0] and pd.isna(m["outcome_total_s"].iloc[2])
    assert m["outcome_load_s"].tolist()[:2] == [20.0, 10.3]
    assert m["outcome_basis"].tolist()[:2] == ["measured", "modelled"] and pd.isna(m["outcome_basis"].iloc[2])
    assert m["actual_total_s"].tolist()[0] == 400.0 and pd.isna(m["actual_total_s"].iloc[1])
