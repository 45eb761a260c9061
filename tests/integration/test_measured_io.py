"""Measured checkpoint I/O on netns: every ``actual_*`` column is a measurement (none is constant
across migrations of different sizes), and the measured load time grows with the checkpoint."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml

from testbed.cli import main
from testbed.transfer.disk_io import SAMPLE_MIN_BYTES
from tests.conftest import small_scenario_dict

pytestmark = pytest.mark.root
SIZES_GB = (5, 40, 320)  # x byte_scale 0.001: 5, 40 and 320 MB really written, sent, synced and read back
# (8x apart; the disk throughputs are measured on at least SAMPLE_MIN_BYTES, so 5 MB is topped up)


@pytest.fixture(scope="module")
def ballast_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("measured_io")
    d = small_scenario_dict(duration_h=4)
    d["sites"] = [{**s, "nodes": 3} for s in d["sites"]]
    d["emulation"] = {"time_scale": 100, "byte_scale": 0.001, "nodes": "ballast"}
    d["links"][0].update(bandwidth_gbps=1, latency_ms=0)
    d["traces"] = {
        "renewable": {"a": {"kind": "curtailment_windows", "capacity_kw": 0.1, "windows_per_day": 0.001},
                      "b": {"kind": "csv", "file": str(tmp / "b.csv")}},
    }
    # b has 6 kW of surplus from 1 h on: energy_only moves the three jobs from a to b
    (tmp / "b.csv").write_text("timestamp,value\n0,0\n3600,6.0\n14400,6.0\n")
    d["workloads"] = {"jobs": [{"id": f"j{i}", "checkpoint_gb": gb, "work_gpu_h": 3, "origin": "a"}
                               for i, gb in enumerate(SIZES_GB)]}
    d["policies"] = ["energy_only"]
    f = tmp / "s.yaml"
    f.write_text(yaml.safe_dump(d))
    out = tmp / "r"
    assert main(["run", str(f), "--substrate", "netns", "--out", str(out), "--no-progress"]) == 0
    m = pd.read_parquet(out / "energy_only" / "migrations.parquet")
    done = m[m["status"] == "completed"]
    assert sorted(done["checkpoint_gb"]) == list(SIZES_GB), m[["job_id", "status", "detail"]]
    return done.sort_values("checkpoint_gb")


def test_no_actual_column_is_constant_across_sizes(ballast_run):
    for col in [c for c in ballast_run.columns if c.startswith("actual_")]:
        values = pd.to_numeric(ballast_run[col], errors="coerce")
        if values.isna().all():
            continue  # not measured on ballast (checkpoint_file_bytes: there is no real checkpoint)
        assert values.notna().all() and values.nunique() == len(values), (col, list(values))
    assert (ballast_run["outcome_basis"] == "measured").all()  # nothing is modelled


def test_measured_load_time_grows_with_checkpoint_size(ballast_run):
    load = ballast_run["actual_load_s"].to_numpy(float)
    # each load is measured at its own moment on a shared disk, whose throughput moved 8x between two
    # migrations in one suite run (5 GB: 36 s, 40 GB: 35 s): the 320 GB load, 8x and 64x the others'
    # bytes, takes longer than both, and none is 0
    assert (load > 0).all() and (load[2] > load[:2]).all(), list(load)
    # a measurement: bytes really written and read back at the scaled size, at a measured throughput
    assert list(ballast_run["measured_io_bytes"]) == [gb * 10**6 for gb in SIZES_GB]
    assert list(ballast_run["io_sample_bytes"]) == [max(gb * 10**6, SAMPLE_MIN_BYTES) for gb in SIZES_GB]
    assert (ballast_run["load_mb_per_s"] > 0).all() and ballast_run["load_mb_per_s"].nunique() == len(SIZES_GB)
    for col in ("actual_checkpoint_s", "actual_downtime_s"):
        assert (ballast_run[col] > 0).all(), col


def test_start_lag_and_host_load_are_recorded_apart(ballast_run):
    r = ballast_run
    assert (r["start_lag_s"] >= 0).all() and (r["control_s"] >= 0).all()
    total = r["actual_checkpoint_s"] + r["actual_transfer_s"] + r["actual_load_s"] + r["actual_downtime_s"]
    assert (total - r["actual_total_s"]).abs().max() < 1e-6  # the start lag is in no phase
    assert r["contended"].isin([True, False]).all() and (r["host_cpu_cores"] >= 0).all()
    assert ((r["other_cpu_cores"] > 0.5) | (r["steal_cpu_cores"] > 0.1) == r["contended"]).all()
