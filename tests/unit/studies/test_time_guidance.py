"""Time guidance: progress lines with an ETA where no terminal shows a bar, the wall-time estimate
said before an emulation starts (with a warning naming emulation.time_scale), sweep ETAs."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

import testbed.progress as progress
from testbed.progress import LineProgress, eta_s, fmt_duration
from testbed.studies.wall_time import WallEstimate, estimate

QUICKSTART = Path(__file__).resolve().parents[3] / "scenarios" / "quickstart.yaml"


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_line_progress_prints_a_line_per_interval_with_an_eta():
    out, clock = io.StringIO(), FakeClock()
    bar = LineProgress(100, "demo", file=out, interval_s=30, clock=clock)
    bar.set_postfix_str("static")
    for _ in range(10):
        clock.t += 2
        bar.update(1)
    assert out.getvalue() == ""  # 20 s: nothing yet
    for _ in range(10):
        clock.t += 2
        bar.update(1)
    lines = out.getvalue().splitlines()
    assert lines == ["demo (static): 15/100 steps (15 %), 30 s elapsed, ETA 2.8 min"]
    bar.close()
    clock.t += 60
    bar.update(1)
    assert len(out.getvalue().splitlines()) == 1


def test_eta_and_durations():
    assert eta_s(0, 10, 5) is None
    assert eta_s(5, 10, 20) == 20
    assert [fmt_duration(s) for s in (42, 210, 7560)] == ["42 s", "3.5 min", "2.1 h"]


def test_a_run_without_a_terminal_prints_progress_lines(tmp_path, capsys, monkeypatch):
    from testbed.cli import main

    monkeypatch.setattr(progress, "LINE_INTERVAL_S", 0.0)
    assert main(["run", str(QUICKSTART), "--set", "duration_h=24", "--out", str(tmp_path / "r")]) == 0
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("quickstart (")]
    assert err and "steps" in err[-1] and "ETA" in err[0], err


def test_the_estimate_warns_naming_time_scale():
    short = WallEstimate(120.0, 8, 120.0, "x")
    assert short.warning() is None and short.line().startswith("estimated wall time: about 2.0 min (x;")
    long = WallEstimate(3600.0, 8, 1.0, "x", bound=True)
    assert "at most 60.0 min" in long.line()
    assert "emulation.time_scale (now 1; e.g. --set emulation.time_scale=12)" in long.warning()


def test_migration_estimate_counts_the_sim_substrates_migrations():
    import testbed
    from testbed.api import prepare
    from testbed.inputs import build_inputs

    loaded = prepare(QUICKSTART, {"duration_h": 24, "emulation.time_scale": 1}).loaded
    est = estimate(loaded, build_inputs(loaded.scenario))
    res = testbed.run(loaded.scenario, plots=False, progress=False)
    assert est.transfers == len(res.migrations) > 0
    moved_s = float(res.migrations["outcome_transfer_s"].sum())
    assert est.seconds >= moved_s  # at time_scale 1 every transfer second is a wall second
    assert est.warning() is not None and "emulation.time_scale (now 1" in est.warning()


def test_federated_estimate_is_a_bound_from_rounds_and_the_slowest_link():
    from tests.unit.federated_support import tiny_scenario

    from testbed.api import prepare
    from testbed.inputs import build_inputs

    sc = tiny_scenario(update_gb=2.0, max_rounds=10, max_hours=3)
    loaded = prepare(sc).loaded
    est = estimate(loaded, build_inputs(loaded.scenario))
    # 6 runs (static_k with k [1, 3] is two); slowest participant link 1 Gbit/s: 2 x 16 s per round
    assert est.bound and est.seconds == 6 * 10 * 2 * 2.0 * 8 / 1.0 / loaded.scenario.emulation.time_scale


def test_the_control_loops_measured_pace_is_recorded_and_goes_into_the_next_estimate(tmp_path, monkeypatch):
    from testbed.api import prepare
    from testbed.inputs import build_inputs
    from testbed.studies import pace

    from tests.conftest import PACE_CACHE_ENV

    assert PACE_CACHE_ENV == pace.CACHE_ENV  # the name the test fixture keeps every test's pace apart by
    monkeypatch.setenv(pace.CACHE_ENV, str(tmp_path / "pace.json"))
    monkeypatch.setattr(pace, "SHIPPED", tmp_path / "none.json")  # nothing shipped either
    loaded = prepare(QUICKSTART, {"duration_h": 24}).loaded
    sc = loaded.scenario
    inputs = build_inputs(sc)
    before = estimate(loaded, inputs, "netns")
    assert "control steps not included" in before.line()
    assert pace.step_wall_s("netns", sc.emulation.nodes) is None
    # two runs of 288 steps: 60 s and 90 s of wall time, 12 s of it in transfers each
    assert pace.record("netns", sc.emulation.nodes, steps=288, wall_s=60.0, transfer_wall_s=12.0) == 48.0 / 288
    pace.record("netns", sc.emulation.nodes, steps=288, wall_s=90.0, transfer_wall_s=12.0)
    assert pace.step_wall_s("mininet", sc.emulation.nodes) is None  # per substrate
    step_s, runs = pace.step_wall_s("netns", sc.emulation.nodes)
    assert runs == 2 and step_s == (48.0 + 78.0) / 2 / 288
    after = estimate(loaded, inputs, "netns")
    steps = len(sc.policies) * 288
    assert after.seconds - before.seconds == pytest.approx(steps * step_s, rel=0.05, abs=2.0)  # no fixed part recorded
    assert f"{steps} control steps at" in after.line() and "measured by the last 2 netns runs" in after.line()
    for _ in range(pace.KEEP + 3):
        pace.record("netns", sc.emulation.nodes, steps=288, wall_s=288.0, transfer_wall_s=0.0)
    assert pace.step_wall_s("netns", sc.emulation.nodes) == (1.0, pace.KEEP)  # only the last runs count
    (tmp_path / "pace.json").write_text("not json")
    assert pace.step_wall_s("netns", sc.emulation.nodes) is None  # an unreadable cache is ignored


def test_a_first_run_is_estimated_from_the_pace_shipped_with_the_code(tmp_path, monkeypatch):
    """Before this machine has run an emulation, the estimate uses the model shipped with the code
    (named as such): per step, per job-step (a step with a job running: its agent is asked), per policy
    run and per run; this machine's first measured run scales it."""
    import json

    from testbed.api import prepare
    from testbed.inputs import build_inputs
    from testbed.studies import pace

    monkeypatch.setenv(pace.CACHE_ENV, str(tmp_path / "pace.json"))
    shipped = json.loads(pace.SHIPPED.read_text(encoding="utf-8"))
    assert shipped["measured_on"] and shipped["model"]
    for key in ("netns/agents", "netns/ballast", "mininet/agents", "mininet/ballast"):
        entry = shipped["pace"][key]
        assert all(entry[k] >= 0 for k in ("step_wall_s", "job_step_wall_s")), key
        assert all(entry[k] > 0 for k in ("fixed_wall_s", "results_wall_s", "finish_wall_s")), key
    loaded = prepare(QUICKSTART, {"duration_h": 24, "emulation.nodes": "agents"}).loaded
    sc, inputs = loaded.scenario, build_inputs(loaded.scenario)
    first = pace.expected("netns", "agents")
    model = shipped["pace"]["netns/agents"]
    assert first.runs == 0 and "shipped" in first.source
    assert (first.step_s, first.job_step_s) == (model["step_wall_s"], model["job_step_wall_s"])
    est = estimate(loaded, inputs, "netns")
    steps = len(sc.policies) * 288
    assert est.seconds >= steps * first.step_s + len(sc.policies) * (first.fixed_s + first.results_s) + first.finish_s
    assert "the default shipped for netns with agents" in est.line() and "job-steps at" in est.line()
    # this machine is twice as slow as the shipped model says: its first run doubles the model
    steps1, jobs1 = 288, 300
    loop = 2 * (steps1 * model["step_wall_s"] + jobs1 * model["job_step_wall_s"])
    pace.record("netns", "agents", steps=steps1, wall_s=loop + 10.0 + 18.0, transfer_wall_s=10.0, fixed_wall_s=18.0,
                results_wall_s=2.5, jobs_steps=jobs1)
    mine = pace.expected("netns", "agents")
    assert mine.runs == 1 and (mine.fixed_s, mine.results_s) == (18.0, 2.5)
    assert mine.step_s == pytest.approx(2 * model["step_wall_s"]) and mine.job_step_s == pytest.approx(2 * model["job_step_wall_s"])
    assert "scaled x 2.00 by the last 1 netns run with agents nodes here" in estimate(loaded, inputs, "netns").line()
    # an older record without job-steps, the fixed part or results: the median step, the rest shipped
    (tmp_path / "pace.json").write_text(json.dumps({"netns/agents": [{"step_wall_s": 0.2, "steps": 288}]}))
    old = pace.expected("netns", "agents")
    assert old.step_s == 0.2 and old.job_step_s is None and old.fixed_s == model["fixed_wall_s"]


def test_a_short_run_does_not_throw_the_next_estimate_off(tmp_path, monkeypatch):
    """A 24-step run measured a step 600x cheaper than a full one here, and once it was the only record
    with job-steps, the next quick start was estimated at 71 s (x 0.00) and took 11 min. Short runs
    count only when nothing else is known, and every run weighs by its size."""
    import json

    from testbed.studies import pace

    monkeypatch.setenv(pace.CACHE_ENV, str(tmp_path / "pace.json"))
    model = pace._shipped("netns", "agents")
    pace.record("netns", "agents", steps=24, wall_s=12.0, transfer_wall_s=0.0, fixed_wall_s=11.99, jobs_steps=24)
    first = pace.expected("netns", "agents")
    assert first.step_s == model["step_wall_s"] and "default shipped" in first.source  # the short run is not telling
    loop = 3 * (576 * model["step_wall_s"] + 1000 * model["job_step_wall_s"])  # a full run, 3x the model
    pace.record("netns", "agents", steps=576, wall_s=loop + 5.0, transfer_wall_s=0.0, fixed_wall_s=5.0, jobs_steps=1000)
    pace.record("netns", "agents", steps=576, wall_s=loop / 3 + 5.0, transfer_wall_s=0.0, fixed_wall_s=5.0, jobs_steps=1000)
    pace.record("netns", "agents", steps=120, wall_s=0.5, transfer_wall_s=0.0, fixed_wall_s=0.4, jobs_steps=10)
    mine = pace.expected("netns", "agents")
    # summed over the three long-enough runs, each weighing by its size (the median of the ratios would be 1)
    m120 = 120 * model["step_wall_s"] + 10 * model["job_step_wall_s"]
    scale = (loop + loop / 3 + 0.1) / (2 * loop / 3 + m120)
    assert mine.runs == 3 and mine.step_s == pytest.approx(scale * model["step_wall_s"], rel=1e-6)
    assert scale > 1.8
    # with nothing shipped, a short run is all there is and is used
    monkeypatch.setattr(pace, "SHIPPED", tmp_path / "none.json")
    (tmp_path / "pace.json").write_text(json.dumps({"netns/agents": [{"step_wall_s": 0.3, "steps": 24}]}))
    assert pace.expected("netns", "agents").step_s == 0.3 and pace.step_wall_s("netns", "agents") == (0.3, 1)


def test_job_steps_count_the_steps_each_job_ran_in():
    import pandas as pd

    from testbed.studies.pace import job_steps

    jobs = pd.DataFrame({"started_s": [0.0, 600.0, None, 900.0], "finished_s": [1200.0, None, None, 901.0]})
    # 4 steps; 2 steps to the end (3600 s) from 600 s at 300 s steps is 10; unstarted: 0; 1 s: 1
    assert job_steps(jobs, 3600.0, 300.0) == 4 + 10 + 0 + 1
