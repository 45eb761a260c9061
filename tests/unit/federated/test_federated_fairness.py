"""Fair baselines: centralized and FedAvg (all sites, IID) evaluated at epoch granularity, with
time-to-accuracy interpolated the same way for both; the pooled clock charges the straggler's work."""

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from testbed.analysis.federated_summary import energy_to_accuracy_kwh, time_to_accuracy_s
from testbed.runner import run_scenario
from testbed.spec.load import LoadedScenario, scenario_from_dict
from tests.unit.federated_support import tiny

EPOCHS = 3


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    d = tiny(training={"local_epochs": EPOCHS, "lr": 0.1}, max_rounds=3, target_accuracy=0.6)
    d["policies"] = [{"name": "static_k", "k": 4, "label": "fedavg-all"}, {"name": "centralized", "nodes": 1},
                     {"name": "static_k", "k": 4, "label": "fedavg-all-pooled", "round_time": "pooled"}]
    loaded = LoadedScenario(scenario=scenario_from_dict(d), path=Path("tiny.yaml"), text="name: fl-tiny\n",
                            sha256="0" * 64, topology_path=None)
    out = tmp_path_factory.mktemp("fair") / "res"
    run_scenario(loaded, out_dir=out, substrate="sim", seed=None, progress=False, force=False, argv=[], plots=False)
    return out


def test_centralized_is_charged_one_epoch_per_evaluation(run):
    c = pd.read_parquet(run / "centralized" / "rounds.parquet")
    f = pd.read_parquet(run / "fedavg-all" / "rounds.parquet")
    sites = pd.read_parquet(run / "centralized" / "sites.parquet")
    trained = c[c["k"] > 0]
    assert len(trained) > 0
    assert (trained["epoch_equivalents"] == 1.0).all()      # one epoch of work per evaluation, not E
    assert (sites["epochs"] == 1).all()
    # charged exactly one pass over the training set at the site's capacity (20 samples/s, scale 10)
    n_train = int(sites["n_samples"].iloc[0])
    assert trained["round_s"].to_numpy() == pytest.approx((n_train * 10 / (20 * sites["capacity"])).to_numpy())
    # FedAvg over all sites on IID data: every round is E epoch-equivalents (its model exists only after it)
    ft = f[f["k"] > 0]
    assert len(ft) > 0 and ft["epoch_equivalents"].to_numpy() == pytest.approx(EPOCHS)
    assert (ft["samples_trained"] == EPOCHS * n_train).all()
    # the centralized run may do as much work as max_rounds all-site rounds: max_rounds x E one-epoch rounds
    assert len(c) <= 3 * EPOCHS


def test_time_to_accuracy_interpolated_the_same_way_for_both(run):
    for label in ("centralized", "fedavg-all"):
        r = pd.read_parquet(run / label / "rounds.parquet")
        s = json.loads((run / label / "summary.json").read_text())
        tta = time_to_accuracy_s(r, 0.6)
        assert (s["time_to_accuracy_s"] is None) == (not math.isfinite(tta))
        if s["reached"]:
            assert s["time_to_accuracy_s"] == pytest.approx(tta)
            assert s["energy_to_accuracy_kwh"] == pytest.approx(energy_to_accuracy_kwh(r, 0.6))


def test_pooled_clock_charges_the_samples_the_sites_train(run):
    r = pd.read_parquet(run / "fedavg-all-pooled" / "rounds.parquet")
    t = r[r["k"] > 0]
    assert (t["samples_charged_pooled"] == t["samples_charged_straggler"]).all()
    assert (t["samples_charged_pooled"] == t["samples_trained"]).all()
    assert (t["round_s"] == t["round_s_pooled"]).all()


def test_interpolation_arithmetic():
    r = pd.DataFrame({"t_start_s": [0.0, 100.0, 300.0], "round_s": [100.0, 200.0, 100.0],
                      "accuracy_before": [0.1, 0.4, 0.8], "accuracy": [0.4, 0.8, 0.9],
                      "energy_kwh": [1.0, 2.0, 1.0]})
    # interpolated: 0.6 is half way from 0.4 to 0.8 in round 2: 100 s + 0.5 x 200 s; 1 kWh + 0.5 x 2 kWh
    assert time_to_accuracy_s(r, 0.6, "interpolated") == pytest.approx(200.0)
    assert energy_to_accuracy_kwh(r, 0.6, "interpolated") == pytest.approx(2.0)
    # the default: the end of the round that reaches it (what a real system knows), its whole energy
    assert time_to_accuracy_s(r, 0.6) == pytest.approx(300.0)
    assert energy_to_accuracy_kwh(r, 0.6) == pytest.approx(3.0)
    for mode in ("end_of_round", "interpolated"):
        assert time_to_accuracy_s(r, 0.4, mode) == pytest.approx(100.0)
        assert math.isnan(time_to_accuracy_s(r, 0.95, mode))
    with pytest.raises(ValueError, match="time-to-accuracy mode"):
        time_to_accuracy_s(r, 0.6, "midpoint")
