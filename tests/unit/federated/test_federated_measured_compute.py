"""federated.compute.samples_per_s: measured: this machine's training speed, timed once per run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testbed.errors import SpecError
from testbed.federated.data import load_dataset
from testbed.federated.throughput import measure_samples_per_s, measure_update_sized_samples_per_s, update_sized_model
from testbed.runner import run_scenario
from testbed.spec.load import LoadedScenario
from testbed.spec.federated import FlTraining
from tests.unit.federated_support import tiny_scenario


def test_the_measurement_is_a_rate_and_a_bigger_model_is_slower():
    data = load_dataset("digits")
    small = measure_samples_per_s(data, FlTraining(model="mlp", hidden=8), seed=0, seconds=0.3)
    big = measure_samples_per_s(data, FlTraining(model="mlp", hidden=1024), seed=0, seconds=0.3)
    assert small > 0 and big > 0 and big < small
    with pytest.raises(ValueError, match="seconds"):
        measure_samples_per_s(data, FlTraining(), seed=0, seconds=0)


def test_a_run_with_measured_compute_records_what_it_measured(tmp_path):
    sc = tiny_scenario(compute={"samples_per_s": "measured", "data_scale": 10})
    loaded = LoadedScenario(scenario=sc, path=Path("tiny.yaml"), text="name: fl-tiny\n", sha256="0" * 64,
                            topology_path=None)
    out = run_scenario(loaded, out_dir=tmp_path / "r", substrate="sim", progress=False, plots=False)
    man = json.loads((out / "manifest.json").read_text())
    rec = man["substrate"]["compute_samples_per_s"]
    assert rec["source"] == "measured on this machine (CPU time, one thread): the study's model" and rec["value"] > 0
    summaries = [json.loads(p.read_text()) for p in out.glob("*/summary.json")]
    assert summaries and all(s["samples_per_s"] == rec["value"] for s in summaries)


@pytest.mark.parametrize("bad", [0, -5, "fast"])
def test_a_bad_rate_names_the_field(bad):
    with pytest.raises(SpecError, match=r"federated.compute.samples_per_s"):
        tiny_scenario(compute={"samples_per_s": bad})


def test_the_update_sized_stand_in_has_the_declared_size_and_a_bigger_one_trains_slower():
    for gb in (0.004, 0.04):
        n = sum(p.numel() for p in update_sized_model(gb, 64, 10, seed=0).parameters())
        assert abs(n * 4 / 1e9 - gb) / gb < 0.1
    data = load_dataset("digits")
    small = measure_update_sized_samples_per_s(0.002, data, FlTraining(batch_size=16), seed=0, seconds=0.2)
    big = measure_update_sized_samples_per_s(0.08, data, FlTraining(batch_size=16), seed=0, seconds=0.2)
    assert small.samples_per_s > big.samples_per_s > 0
    assert small.steps >= 3 and small.measured_gb == 0.002 and "fastest of" in small.describe()


def test_above_the_measured_limit_the_rate_is_scaled_by_size(monkeypatch):
    from testbed.federated import throughput

    monkeypatch.setattr(throughput, "MAX_MEASURED_UPDATE_GB", 0.01)
    r = measure_update_sized_samples_per_s(0.04, load_dataset("digits"), FlTraining(), seed=0, seconds=0.1)
    assert r.measured_gb == 0.01
    assert r.samples_per_s == pytest.approx(r.measured_samples_per_s / 4)
    assert "scaled by" in r.describe()


def test_a_run_with_update_sized_compute_says_what_trained(tmp_path):
    sc = tiny_scenario(compute={"samples_per_s": "measured", "measured_model": "update_sized", "data_scale": 10},
                       update_gb=0.01)
    loaded = LoadedScenario(scenario=sc, path=Path("tiny.yaml"), text="name: fl-tiny\n", sha256="0" * 64,
                            topology_path=None)
    out = run_scenario(loaded, out_dir=tmp_path / "r", substrate="sim", progress=False, plots=False)
    rec = json.loads((out / "manifest.json").read_text())["substrate"]["compute_samples_per_s"]
    assert "MLP" in rec["source"] and "0.01 GB" in rec["source"] and rec["value"] > 0


@pytest.mark.parametrize("compute,extra,field", [
    ({"samples_per_s": 20, "measured_model": "update_sized"}, {"update_gb": 1.0}, "measured_model"),
    ({"samples_per_s": "measured", "measured_model": "update_sized"}, {"update_gb": None}, "update_gb"),
    ({"samples_per_s": "measured", "measured_model": "big"}, {}, "measured_model"),
])
def test_update_sized_needs_measured_and_a_size(compute, extra, field):
    with pytest.raises(SpecError, match=field):
        tiny_scenario(compute=compute, **extra)


def test_the_stand_in_is_timed_in_one_threads_cpu_time(monkeypatch):
    """Wall time under other load does not count: the clock is the thread's CPU time, torch runs on
    one thread while measuring, and its thread count is restored after."""
    import torch

    from testbed.federated import throughput

    ticks = iter(range(0, 10_000))
    monkeypatch.setattr(throughput.time, "thread_time", lambda: next(ticks) * 0.5)   # every read: +0.5 s
    monkeypatch.setattr(throughput.time, "perf_counter", lambda: (_ for _ in ()).throw(AssertionError("wall clock")))
    seen = []
    real = throughput.torch.set_num_threads
    monkeypatch.setattr(throughput.torch, "set_num_threads", lambda n: (seen.append(n), real(n)))
    before = torch.get_num_threads()
    r = measure_update_sized_samples_per_s(0.002, load_dataset("digits"), FlTraining(batch_size=16), seed=0,
                                           seconds=1.0)
    assert r.measured_samples_per_s == pytest.approx(16 / 0.5)   # each step spans exactly one 0.5 s tick
    assert seen == [1, before] and torch.get_num_threads() == before
