"""federated.compute.samples_per_s: measured: this machine's training speed, timed once per run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testbed.errors import SpecError
from testbed.federated.data import load_dataset
from testbed.federated.throughput import measure_samples_per_s
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
    assert rec["source"] == "measured on this machine" and rec["value"] > 0
    summaries = [json.loads(p.read_text()) for p in out.glob("*/summary.json")]
    assert summaries and all(s["samples_per_s"] == rec["value"] for s in summaries)


@pytest.mark.parametrize("bad", [0, -5, "fast"])
def test_a_bad_rate_names_the_field(bad):
    with pytest.raises(SpecError, match=r"federated.compute.samples_per_s"):
        tiny_scenario(compute={"samples_per_s": bad})
