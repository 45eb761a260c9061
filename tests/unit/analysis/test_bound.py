"""The pooled-renewables bound: what no placement can avoid."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from testbed.analysis.bound import attainable_reduction, pooled_bound_kwh


def _ts(rows):
    return pd.DataFrame(rows, columns=["t_s", "site", "demand_kwh", "renewable_available_kwh"])


def test_hand_computed_bound():
    ts = _ts([(0, "a", 2.0, 0.0), (0, "b", 0.0, 1.5),   # a short 2, b spare 1.5: pooled 0.5 (per site: 2.0)
              (300, "a", 1.0, 3.0), (300, "b", 1.0, 0.0)])  # pooled: 0 (per site: 1.0)
    assert pooled_bound_kwh(ts) == pytest.approx(0.5)
    assert attainable_reduction(3.0, 0.5) == pytest.approx(1 - 0.5 / 3.0)
    assert attainable_reduction(0.0, 0.0) is None and pooled_bound_kwh(_ts([])) == 0.0


def test_never_above_what_any_site_by_site_accounting_draws():
    g = np.random.default_rng(3)
    for _ in range(50):
        n_t, n_s = g.integers(1, 30), g.integers(1, 6)
        ts = _ts([(t * 300, f"s{s}", g.exponential(1.0), g.exponential(1.0)) for t in range(n_t) for s in range(n_s)])
        per_site = float((ts["demand_kwh"] - ts["renewable_available_kwh"]).clip(lower=0).sum())
        assert pooled_bound_kwh(ts) <= per_site + 1e-12


def test_a_real_run_is_at_or_above_its_bound(tmp_path):
    from testbed.cli import main
    from tests.conftest import ROOT

    out = tmp_path / "r"
    assert main(["run", str(ROOT / "scenarios" / "quickstart.yaml"), "--substrate", "sim", "--out", str(out), "--no-progress"]) == 0
    for policy in [p for p in out.iterdir() if (p / "timeseries.parquet").exists()]:
        ts = pd.read_parquet(policy / "timeseries.parquet")
        assert float(ts["grid_kwh"].sum()) >= pooled_bound_kwh(ts) - 1e-9
