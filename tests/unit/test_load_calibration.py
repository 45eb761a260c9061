"""``testbed calibrate load``: checkpoint save/load timed at several sizes, a line fitted per operation."""

from __future__ import annotations

import json
import statistics

import numpy as np
import pytest

from testbed.cli import main
from testbed.load_calibration import OPS, fit_line, measure

torch = pytest.importorskip("torch")


def test_fit_recovers_a_known_line_with_its_interval():
    g = np.random.default_rng(0)
    x = np.repeat([0.1, 0.5, 1.0, 2.0], 5)
    y = 0.3 + 1.7 * x + g.normal(0, 0.02, len(x))
    f = fit_line(list(x), list(y))
    assert f.fixed_ci95[0] <= 0.3 <= f.fixed_ci95[1] and f.s_per_gb_ci95[0] <= 1.7 <= f.s_per_gb_ci95[1]
    assert abs(f.gb_per_s - 1 / 1.7) < 0.01 and f.r2 > 0.99 and f.n == 20
    assert abs(f.seconds(10.0) - (0.3 + 17.0)) < 0.5


@pytest.mark.parametrize("x", [[1.0, 2.0], [1.0, 1.0, 1.0]])
def test_fit_refuses_too_little(x):
    with pytest.raises(ValueError, match="at least 3 points over at least 2 sizes"):
        fit_line(x, [1.0] * len(x))


def test_measure_reads_back_every_byte_and_bigger_takes_longer(tmp_path):
    cal = measure([4, 96], repeats=3, directory=tmp_path)
    assert {p["op"] for p in cal.points} == set(OPS) and len(cal.points) == 3 * 2 * 3
    assert not list(tmp_path.iterdir())  # its files are gone
    small = [p["size_bytes"] for p in cal.points if p["op"] == "save" and p["size_bytes"] < 10 << 20]
    assert small and all(s >= 4 << 20 for s in small)  # the file holds at least the tensors' bytes
    for op in ("load_cold", "load_warm"):
        pts = {p["size_bytes"]: [] for p in cal.points}
        for p in cal.points:
            if p["op"] == op:
                pts[p["size_bytes"]].append(p["seconds"])
        lo, hi = min(pts), max(pts)
        # 24x the bytes: slower. Medians of three, since one small load can stall ~10 ms on a busy
        # machine (seen in CI: 0.7 ms and 10.1 ms for the same 4 MB)
        assert statistics.median(pts[hi]) > statistics.median(pts[lo]), pts
        assert cal.fits[op].s_per_gb > 0
    assert cal.t_load_s(100.0) > cal.t_load_s(1.0)
    assert json.loads(json.dumps(cal.to_dict()))["format"] == "testbed-load-calibration/1"


@pytest.mark.parametrize("argv,flag", [
    (["--sizes-mb", "64"], "--sizes-mb"),
    (["--sizes-mb", "64", "-1"], "--sizes-mb"),
    (["--sizes-mb", "64", "nan"], "--sizes-mb"),
    (["--repeats", "0"], "--repeats"),
    (["--dir", "/nonexistent-dir"], "--dir"),
])
def test_bad_options_are_refused_naming_the_flag(argv, flag, tmp_path, capsys):
    out = tmp_path / "load.json"
    assert main(["calibrate", "load", *argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and flag in err and "Traceback" not in err
    assert not out.exists()


def test_cli_writes_the_fit_and_the_families(tmp_path, capsys):
    import yaml

    from tests.conftest import small_scenario_dict

    scen = tmp_path / "small.yaml"
    scen.write_text(yaml.safe_dump(small_scenario_dict()))
    out = tmp_path / "load.json"
    assert main(["calibrate", "load", "--sizes-mb", "2", "8", "--repeats", "2", "--dir", str(tmp_path),
                 "--scenario", str(scen), "--out", str(out)]) == 0
    rec = json.loads(out.read_text())
    assert set(rec["fits"]) == set(OPS) and rec["families"]
    for fam in rec["families"].values():
        assert fam["paper_t_load_s"] == 10.3 and fam["t_load_s"] > 0
    assert "T_load(S) =" in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["load.json", scen.name])
