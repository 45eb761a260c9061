"""The sim's migration I/O truth (testbed/io_model.py, substrate.io_model): a line in the checkpoint's
size per phase fitted to calibration points, a lognormal spread measured from their residuals, drawn
per migration from the run's seed; ``constant`` gives back the paper's arithmetic exactly."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from testbed import io_model
from testbed.errors import SpecError
from testbed.inputs import build_inputs
from testbed.io_model import IoModel, IoModelError, PhaseModel, from_calibration, relative_residual_sd
from testbed.spec import load_scenario, scenario_from_dict
from testbed.substrate.base import MigrationOrder
from testbed.substrate.sim import SimSubstrate
from tests.conftest import ROOT, run_policies, small_scenario_dict

SECRET = "SECRET-CONTENT-7f3a"


def calibration(save=(0.2, 3.0, 0.0), load=(0.1, 0.8, 0.0), sizes_gb=(0.25, 0.5, 1.0, 2.0), repeats=4,
                seed=0) -> dict:
    """A ``testbed calibrate load`` record whose points lie on known lines (fixed_s, s_per_gb), times
    a lognormal factor of mean 1 and the given relative s.d."""
    g = np.random.default_rng(seed)
    points = []
    for op, (fixed, slope, rel) in (("save", save), ("load_cold", load), ("load_warm", load)):
        sigma = math.sqrt(math.log1p(rel * rel))
        for size in sizes_gb:
            for r in range(repeats):
                factor = math.exp(sigma * g.standard_normal() - sigma * sigma / 2)
                points.append({"op": op, "size_bytes": int(size * 1e9), "seconds": (fixed + slope * size) * factor,
                               "repeat": r})
    return {"format": io_model.FORMAT, "points": points}


def write(path, data) -> str:
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


# the model


def test_a_phase_is_a_line_in_the_size_times_a_mean_one_factor():
    p = PhaseModel(1.0, 2.0, 0.0)
    assert p.mean_s(10.0) == 21.0 and p.seconds(10.0, z=5.0) == 21.0  # no spread: the draw is ignored
    assert PhaseModel(-1.0, 2.0).mean_s(0.1) == 0.0  # never negative
    q = PhaseModel(0.0, 1.0, 0.5)
    z = np.random.default_rng(1).standard_normal(200_000)
    x = np.array([q.seconds(10.0, float(v)) for v in z])
    assert x.mean() == pytest.approx(10.0, rel=0.01) and x.std() / x.mean() == pytest.approx(0.5, rel=0.03)
    with pytest.raises(ValueError):
        PhaseModel(0.0, 1.0, -0.1)


def test_the_fit_recovers_the_calibration_lines_and_their_spread():
    data = calibration(save=(0.2, 3.0, 0.3), load=(0.1, 0.8, 0.1), sizes_gb=(0.25, 0.5, 1.0, 2.0, 4.0), repeats=40)
    m = from_calibration(data, downtime_s=0.4)
    assert m.checkpoint.s_per_gb == pytest.approx(3.0, rel=0.1) and m.load.s_per_gb == pytest.approx(0.8, rel=0.05)
    assert m.checkpoint.rel_sd == pytest.approx(0.3, rel=0.15) and m.load.rel_sd == pytest.approx(0.1, rel=0.15)
    assert (m.downtime.fixed_s, m.downtime.s_per_gb, m.downtime.rel_sd) == (0.4, 0.0, 0.0)  # the scenario's
    exact = from_calibration(calibration(), downtime_s=0.0)  # points on the lines: no spread
    assert (exact.checkpoint.fixed_s, exact.checkpoint.s_per_gb) == (pytest.approx(0.2), pytest.approx(3.0))
    assert exact.checkpoint.rel_sd == pytest.approx(0.0, abs=1e-9) and exact.mean(10.0) == (
        pytest.approx(30.2), pytest.approx(8.1), 0.0)


def test_the_relative_residual_sd_stays_finite_where_the_fit_is_near_zero():
    x = [0.1, 0.1, 1.0, 1.0, 2.0, 2.0]
    y = [0.0, 0.2, 0.9, 1.1, 1.8, 2.2]  # +-10 % and +-20 % of the big points; a zero at the small size
    sd = relative_residual_sd(x, y, 0.0, 1.0)
    assert 0.05 < sd < 0.3
    assert math.isnan(relative_residual_sd([1.0, 2.0], [1.0, 2.0], 0.0, 1.0))


def test_draws_are_reproducible_per_seed_and_have_the_measured_spread():
    m = IoModel(PhaseModel(0.0, 2.0, 0.4), PhaseModel(0.5, 1.0, 0.2), PhaseModel(0.4, 0.0, 0.0))
    g1, g2 = np.random.default_rng(7), np.random.default_rng(7)
    assert [m.draw(40.0, g1) for _ in range(5)] == [m.draw(40.0, g2) for _ in range(5)]
    assert m.draw(40.0, np.random.default_rng(7)) != m.draw(40.0, np.random.default_rng(8))
    g = np.random.default_rng(3)
    d = np.array([m.draw(40.0, g) for _ in range(50_000)])
    assert d.mean(axis=0) == pytest.approx(m.mean(40.0), rel=0.01)
    rel = d.std(axis=0) / d.mean(axis=0)
    assert rel[0] == pytest.approx(0.4, rel=0.05) and rel[1] == pytest.approx(0.2, rel=0.05)
    assert np.ptp(d[:, 2]) == 0.0 and d[0, 2] == 0.4  # no spread: exactly the constant


def test_the_record_must_be_a_calibration_whose_fits_are_its_points(tmp_path):
    data = calibration(save=(0.2, 3.0, 0.2))
    m = from_calibration(data, downtime_s=0.4)
    data["fits"] = {"save": {"fixed_s": m.checkpoint.fixed_s, "s_per_gb": m.checkpoint.s_per_gb,
                             "rel_sd": m.checkpoint.rel_sd}}
    from_calibration(data, downtime_s=0.4)  # matches: fine
    data["fits"]["save"]["s_per_gb"] *= 0.5
    with pytest.raises(IoModelError, match=r"fits\.save\.s_per_gb: does not match"):
        from_calibration(data, downtime_s=0.4, where="f.json")
    with pytest.raises(IoModelError, match="bigger checkpoints did not take longer"):
        from_calibration(calibration(save=(5.0, -1.0, 0.0)), downtime_s=0.4)
    bad = calibration()
    bad["points"][3]["seconds"] = SECRET
    with pytest.raises(IoModelError) as e:
        from_calibration(bad, downtime_s=0.4, where="f.json")
    assert e.value.problems == [("f.json", "points[3].seconds: must be a finite number >= 0")]
    for broken in ({"format": SECRET}, [SECRET], {"format": io_model.FORMAT, "points": [{"op": "save"}]},
                   {"format": io_model.FORMAT, "points": calibration()["points"][:2]}):
        with pytest.raises(IoModelError) as e:
            from_calibration(broken, downtime_s=0.4, where="f.json")
        assert SECRET not in str(e.value) and e.value.problems[0][0] == "f.json"


def test_the_shipped_calibration_is_traceable_to_its_measurement():
    raw = json.loads((ROOT / "testbed" / io_model.SHIPPED).read_text(encoding="utf-8"))
    for key in ("command", "date_utc", "machine", "torch", "sizes_mb", "repeats", "points", "fits"):
        assert raw.get(key), key
    assert raw["command"].startswith("testbed calibrate load") and len(set(raw["sizes_mb"])) >= 3
    for op in ("save", "load_cold"):
        f = raw["fits"][op]
        assert f["s_per_gb_ci95"][0] > 0 and f["fixed_ci95"][0] <= f["fixed_s"] <= f["fixed_ci95"][1]
        assert f["n"] == len([p for p in raw["points"] if p["op"] == op]) and f["rel_sd"] > 0
    m = io_model.default_io_model(downtime_s=0.4)
    assert m.checkpoint.s_per_gb == raw["fits"]["save"]["s_per_gb"] and m.load.rel_sd == raw["fits"]["load_cold"]["rel_sd"]
    assert "sha256" in m.source and "testbed calibrate load" in m.provenance


def test_an_older_calibration_without_spread_is_read_from_its_points():
    m = io_model.load_io_model(ROOT / "results" / "reference" / "load-calibration.json", downtime_s=0.4)
    raw = json.loads((ROOT / "results" / "reference" / "load-calibration.json").read_text())
    assert m.load.s_per_gb == pytest.approx(raw["fits"]["load_cold"]["s_per_gb"]) and m.load.rel_sd > 0


# the sim


def _two_sizes(**substrate) -> dict:
    d = small_scenario_dict(duration_h=72, substrate=substrate)
    d["workloads"] = {"arrivals": {"jobs_per_day": 12, "until_h": 48},
                      "mix": [{"family": "small", "checkpoint_gb": 10, "work_gpu_h": [4, 12]},
                              {"family": "big", "checkpoint_gb": 120, "work_gpu_h": [4, 12]}]}
    d["policies"] = ["no_filter"]
    return d


def _migrations(d: dict, seed=None):
    m = run_policies(scenario_from_dict(d), seed)["no_filter"]["migrations"]
    return m[m["status"] == "completed"]


def test_by_default_the_sim_draws_size_dependent_io_not_the_predictors_constants():
    done = _migrations(_two_sizes())
    assert done["checkpoint_gb"].nunique() == 2, "needs migrations of both sizes"
    assert (done["outcome_load_s"] != 10.3).all() and (done["outcome_checkpoint_s"] > 0).all()
    assert done["outcome_load_s"].nunique() == len(done)  # drawn, not one constant
    assert (done["predicted_load_s"] == 10.3).all()  # the prediction keeps the paper's constant
    by_size = done.groupby("checkpoint_gb")[["outcome_checkpoint_s", "outcome_load_s"]].mean()
    assert (by_size.loc[120.0] > 4 * by_size.loc[10.0]).all()
    total = done[["outcome_checkpoint_s", "outcome_transfer_s", "outcome_load_s", "outcome_downtime_s"]].sum(axis=1)
    assert np.allclose(done["outcome_total_s"], total) and (done["outcome_downtime_s"] == 0.4).all()


def test_the_draws_are_the_runs_seeds():
    a, b = _migrations(_two_sizes()), _migrations(_two_sizes())
    assert a["outcome_checkpoint_s"].tolist() == b["outcome_checkpoint_s"].tolist()
    assert a["outcome_load_s"].tolist() == b["outcome_load_s"].tolist()
    c = _migrations(_two_sizes(), seed=5)
    assert not set(a["outcome_load_s"]) & set(c["outcome_load_s"])


def test_a_migrations_draw_does_not_depend_on_other_jobs_migrations():
    inputs = build_inputs(scenario_from_dict(small_scenario_dict()))
    alone, after = SimSubstrate(inputs), SimSubstrate(inputs)
    after.start_migration(MigrationOrder("other", "b", "a", 24.0, 0.0))
    for sub in (alone, after):
        sub.start_migration(MigrationOrder("x", "a", "b", 40.0, 100.0))
        sub.start_migration(MigrationOrder("x", "b", "a", 40.0, 5000.0))
    got = [[(o.checkpoint_s, o.load_s) for o in sub.poll(1e9) if o.order.job_id == "x"] for sub in (alone, after)]
    assert got[0] == got[1] and got[0][0] != got[0][1]  # a job's second migration draws anew


def test_the_transfer_starts_once_the_checkpoint_is_written(tmp_path):
    cal = write(tmp_path / "cal.json", calibration(save=(0.0, 0.4, 0.0), load=(1.0, 0.5, 0.0)))
    d = small_scenario_dict(substrate={"protocol_efficiency": 1.0, "slow_start": False, "io_model": cal})
    d["traces"]["bandwidth"] = {"events": [{"link": "a-b", "start_h": 1.0, "duration_h": 1.0, "degradation_pct": 50}]}
    sub = SimSubstrate(build_inputs(scenario_from_dict(d)))
    # written in 16 s (40 GB x 0.4 s/GB); sent from 3600 - 16: 16 s at 10 Gbit/s, the rest at 5
    sub.start_migration(MigrationOrder("y", "a", "b", 40.0, 3600.0 - 32.0))
    (out,) = sub.poll(1e9)
    assert out.checkpoint_s == pytest.approx(16.0) and out.load_s == pytest.approx(21.0) and out.downtime_s == 0.4
    assert out.transfer_s == pytest.approx(48.0, rel=1e-9)
    assert out.resume_s == pytest.approx(3600.0 - 32.0 + 16.0 + 48.0 + 21.0 + 0.4)
    desc = sub.describe()["modelled"]
    assert "cal.json" in desc["checkpoint_s"] and "'save'" in desc["checkpoint_s"] and "'load_cold'" in desc["load_s"]
    assert "t_downtime_s" in desc["downtime_s"]


def test_constant_gives_back_the_papers_arithmetic_exactly():
    done = _migrations(_two_sizes(io_model="constant"))
    assert len(done) and (done["outcome_checkpoint_s"] == 0.0).all()
    assert (done["outcome_load_s"] == 10.3).all() and (done["outcome_downtime_s"] == 0.4).all()
    assert done["outcome_total_s"].tolist() == (done["outcome_transfer_s"] + 10.3 + 0.4).tolist()
    inputs = build_inputs(scenario_from_dict(small_scenario_dict(substrate={"io_model": "constant"})))
    sub = SimSubstrate(inputs)
    sub.start_migration(MigrationOrder("x", "a", "b", 40.0, 0.0))
    (out,) = sub.poll(1e9)
    assert (out.checkpoint_s, out.load_s, out.downtime_s) == (0.0, 10.3, 0.4)
    assert "constant 10.3 s" in sub.describe()["modelled"]["load_s"]


def test_the_default_describes_the_shipped_fit():
    sub = SimSubstrate(build_inputs(scenario_from_dict(small_scenario_dict())))
    desc = sub.describe()
    assert desc["io_model"] == "measured"
    assert "testbed/data/io-model.json" in desc["modelled"]["load_s"] and "95 % CI" in desc["modelled"]["load_s"]


# the scenario field


def _problems(d: dict, base_dir=None) -> list[tuple[str, str]]:
    with pytest.raises(SpecError) as e:
        scenario_from_dict(d, base_dir)
    return e.value.problems


def test_a_bad_value_names_the_field():
    (where, msg), = _problems(small_scenario_dict(substrate={"io_model": "mesured"}))
    assert where == "substrate.io_model" and "did you mean measured" in msg
    (where, msg), = _problems(small_scenario_dict(substrate={"io_model": "nope.json"}))
    assert where == "substrate.io_model" and "file not found: nope.json" in msg


def test_a_calibration_path_is_found_beside_the_scenario(tmp_path, monkeypatch):
    folder = tmp_path / "scen"
    folder.mkdir()
    cal = write(folder / "my-machine.json", calibration())
    (folder / "s.yaml").write_text(json.dumps(small_scenario_dict(substrate={"io_model": "my-machine.json"})))
    monkeypatch.chdir(tmp_path)
    sc = load_scenario(folder / "s.yaml").scenario
    assert sc.substrate.io_model == str((folder / "my-machine.json").resolve()) == cal
    assert SimSubstrate(build_inputs(sc)).describe()["modelled"]["checkpoint_s"].count("my-machine.json") == 1


@pytest.mark.parametrize("content", [
    SECRET.encode(),                                                   # not JSON
    json.dumps({"format": "something-else", "note": SECRET}).encode(),  # not a calibration
    json.dumps({"format": io_model.FORMAT, "points": [{"op": SECRET, "size_bytes": SECRET, "seconds": 1}]}).encode(),
    b"\xff\xfe" + SECRET.encode(),                                     # not UTF-8
    b"",                                                               # empty
])
def test_a_garbage_file_names_the_field_and_the_file_never_its_content(tmp_path, content):
    (tmp_path / "cal.json").write_bytes(content)
    (where, msg), = _problems(small_scenario_dict(substrate={"io_model": "cal.json"}), tmp_path)
    assert where == "substrate.io_model" and str(tmp_path / "cal.json") in msg and SECRET not in msg


def test_a_directory_is_not_a_calibration(tmp_path):
    (tmp_path / "cal.json").mkdir()
    (where, msg), = _problems(small_scenario_dict(substrate={"io_model": "cal.json"}), tmp_path)
    assert where == "substrate.io_model" and "not a regular file" in msg


def test_the_schema_documents_the_field():
    from testbed.spec.scenario import Scenario

    schema = json.dumps(Scenario.model_json_schema())
    assert "testbed calibrate load" in schema and "io_model" in schema


# the calibration writes what the model reads


def test_calibrate_load_records_the_spread_and_how_it_was_measured(tmp_path):
    pytest.importorskip("torch")
    from testbed.cli import main

    out = tmp_path / "load.json"
    # sizes 16x apart: at a few MiB, a busy machine's jitter can hide the size dependence (the loader
    # then refuses the file, as it should)
    assert main(["calibrate", "load", "--sizes-mb", "8", "128", "--repeats", "2", "--dir", str(tmp_path),
                 "--out", str(out)]) == 0
    rec = json.loads(out.read_text())
    assert rec["command"].startswith("testbed calibrate load --sizes-mb 8 128 --repeats 2")
    assert rec["date_utc"].endswith("Z") and rec["machine"]["cpus"] >= 1 and rec["sizes_mb"] == [8, 128]
    for op in ("save", "load_cold", "load_warm"):
        assert rec["fits"][op]["rel_sd"] >= 0 and len(rec["fits"][op]["rel_sd_by_size_gb"]) >= 1
    m = io_model.load_io_model(out, downtime_s=0.4)
    assert m.checkpoint.rel_sd == rec["fits"]["save"]["rel_sd"] and m.load.s_per_gb == rec["fits"]["load_cold"]["s_per_gb"]
