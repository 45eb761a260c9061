"""The synthetic sample files in traces/samples load with the real-format loaders and are
exactly what make_samples.py writes."""

from __future__ import annotations

import importlib.util
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import numpy as np
import pytest

from testbed.traces import load_caiso, load_csv, load_google_power

SAMPLES = Path(__file__).resolve().parents[3] / "traces" / "samples"
START = datetime(2024, 4, 20, tzinfo=ZoneInfo("America/Los_Angeles"))
TWO_DAYS = 2 * 86400.0


def make_samples_module():
    spec = importlib.util.spec_from_file_location("make_samples", SAMPLES / "make_samples.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_samples_are_small_and_documented_as_synthetic():
    files = [p for p in SAMPLES.iterdir() if p.is_file()]
    assert sum(p.stat().st_size for p in files) < 200_000
    assert "SYNTHETIC" in (SAMPLES / "README.md").read_text()


@pytest.mark.parametrize("name", ["caiso-sample.xlsx", "caiso-curtailments-sample.csv"])
def test_caiso_samples_load(name):
    tr = load_caiso(SAMPLES / name, start=START, duration_s=TWO_DAYS, step_s=300, column="total_curtailment")
    wins = tr.windows_above(1.0)
    assert len(wins) >= 2 and tr.values.max() > 0
    for a, b in wins:  # midday curtailment
        assert 6 <= (a % 86400) / 3600 and (b % 86400) / 3600 <= 20


def test_caiso_workbook_production_sheet():
    solar = load_caiso(SAMPLES / "caiso-sample.xlsx", start=START, duration_s=TWO_DAYS, step_s=3600,
                       column="production:Solar")
    assert solar.at(3 * 3600) == 0.0 and solar.at(13 * 3600) > 10_000_000.0  # kW


def test_google_sample_loads_both_pdus():
    for pdu in ("pdu6", "pdu7", None):
        tr = load_google_power(SAMPLES / "google-power-sample.csv", pdu=pdu, capacity_kw=500.0,
                               duration_s=TWO_DAYS, step_s=300)
        assert len(tr) == 576 and 0 < tr.values.min() and tr.values.max() < 500.0


def test_solar_site_sample_loads():
    tr = load_csv(SAMPLES / "solar-site.csv", unit="kW", start=START, duration_s=TWO_DAYS, step_s=900)
    assert tr.at(2 * 3600) == 0.0 and tr.at(13 * 3600) > 100.0 and tr.values.max() <= 500.0


def test_samples_are_reproducible(tmp_path):
    mod = make_samples_module()
    production, curtailments = mod.caiso_tables()
    mod.write_caiso_workbook(tmp_path / "caiso-sample.xlsx", production, curtailments)
    mod.write_caiso_csv(tmp_path / "caiso-curtailments-sample.csv", curtailments)
    mod.write_google_csv(tmp_path / "google-power-sample.csv")
    for name in ("caiso-sample.xlsx", "caiso-curtailments-sample.csv", "google-power-sample.csv"):
        assert (tmp_path / name).read_bytes() == (SAMPLES / name).read_bytes(), name
    mod.write_solar_csv(tmp_path / "solar-site.csv")
    ours = np.loadtxt(tmp_path / "solar-site.csv", delimiter=",", skiprows=1, usecols=1)
    committed = np.loadtxt(SAMPLES / "solar-site.csv", delimiter=",", skiprows=1, usecols=1)
    np.testing.assert_allclose(ours, committed, atol=0.01)  # pvlib versions may differ in the last digit
