"""Damping of the migrating policies: a job between two sites whose equal 1-hour windows
alternate moves at most once per minimum dwell; with the damping off (the paper) it follows every
window, so the same check fails there."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from testbed.controller.controller import Controller
from testbed.inputs import build_inputs
from testbed.policies import make_policy
from testbed.spec import scenario_from_dict
from testbed.substrate.sim import SimSubstrate
from testbed.traces.base import Trace
from testbed.traces.forecast import WindowForecaster
from tests.conftest import small_scenario_dict

H = 3600.0
POLICIES = ["energy_only", "feasibility_aware", "no_filter", "feasibility_classes"]


def _alternating(site: str, first: bool) -> Trace:
    """2 kW in every other hour (even hours if ``first``, else odd), 0 kW between: equal 1 h windows."""
    hours = np.arange(48)
    on = (hours % 2 == 0) if first else (hours % 2 == 1)
    return Trace(hours * H, np.where(on, 2.0, 0.0), unit="kW", name=f"renewable:{site}", end_s=48 * H)


def _run(policy: dict) -> "dict[str, object]":
    d = small_scenario_dict(duration_h=24, policies=[policy])
    d["workloads"] = {"jobs": [{"id": "j", "checkpoint_gb": 40, "work_gpu_h": 20, "arrival_h": 0, "origin": "a"}]}
    sc = scenario_from_dict(d)
    inputs = build_inputs(sc)
    traces = {"a": _alternating("a", True), "b": _alternating("b", False)}
    inputs = dataclasses.replace(inputs, renewable_kw=traces, windows=WindowForecaster(traces, {"a": 0.75, "b": 0.75}))
    with SimSubstrate(inputs) as sub:
        return Controller(inputs, make_policy(sc.policies[0], sc), sub).run().tables()


def _gaps_h(tables) -> np.ndarray:
    m = tables["migrations"].sort_values("t_decision_s")
    assert (m["job_id"] == "j").all()
    return np.diff(m["t_decision_s"].to_numpy()) / H


@pytest.mark.parametrize("name", POLICIES)
def test_at_most_one_move_per_dwell_time(name):
    t = _run({"name": name})  # defaults: min_dwell_h 2, return_margin 1
    gaps = _gaps_h(t)
    assert len(gaps) >= 3  # it does keep following the renewable power
    assert (gaps >= 2.0).all(), gaps
    d = t["decisions"]
    assert d["reason"].str.contains("minimum dwell 2 h").any()


@pytest.mark.parametrize("name", POLICIES)
def test_without_damping_it_moves_every_window(name):
    gaps = _gaps_h(_run({"name": name, "min_dwell_h": 0, "return_margin": 0}))
    assert (gaps < 2.0).any(), gaps  # the dwell check above fails here
    assert np.median(gaps) == pytest.approx(1.0)


def test_a_longer_dwell_spaces_moves_further():
    gaps = _gaps_h(_run({"name": "feasibility_aware", "min_dwell_h": 4}))
    assert len(gaps) >= 2 and (gaps >= 4.0).all(), gaps


def test_the_return_margin_blocks_a_move_back_that_barely_pays():
    # energy cost of 40 GB at 10 Gbit/s: 1.8 kW x 32 s = 0.016 kWh; gain: 0.75 kW x 1 h = 0.75 kWh
    # (46.9 x the cost): a margin of 50 forbids every move back, so after a -> b the job stays at b
    t = _run({"name": "feasibility_aware", "min_dwell_h": 0, "return_margin": 50})
    m = t["migrations"]
    assert list(zip(m["src"], m["dst"])) == [("a", "b")]
    assert t["decisions"]["reason"].str.contains("a move back to a saves 0.750 kWh").any()
    t = _run({"name": "feasibility_aware", "min_dwell_h": 0, "return_margin": 40})
    assert len(t["migrations"]) > 2
