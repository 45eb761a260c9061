"""``testbed bench power``'s own parts without root: the background load it starts and ends, the
spread over repeats, and the refusal of bad options."""

from __future__ import annotations

import os

import pytest

from testbed.bench.power import background_load, render, spread
from testbed.cli import main


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_background_load_runs_and_is_ended_by_pid():
    with background_load(2) as pids:
        assert len(pids) == 2 and all(_alive(p) for p in pids) and os.getpid() not in pids
    assert not any(_alive(p) for p in pids)
    with pytest.raises(RuntimeError):
        with background_load(1) as pids:
            raise RuntimeError("the bench failed")
    assert not _alive(pids[0])


def _row(cap, err):
    return {"cap_w": cap, "error_pct": err, "pass": abs(err) <= 10.0}


def test_spread_over_repeats_and_its_table():
    repeats = [[_row(150, -2.0), _row(450, 1.0)], [_row(150, 4.0), _row(450, -11.0)]]
    s = spread(repeats)
    assert s[0]["min_pct"] == -2.0 and s[0]["max_pct"] == 4.0 and s[0]["mean_pct"] == 1.0
    assert s[1]["passed"] == 1 and s[1]["max_abs_pct"] == 11.0
    full = {"profile": "p", "family": "f", "throttle": "cgroup-v1", "pairs": 8, "phase_s": 0.6, "settle_s": 0.1,
            "warmup_s": 1.0, "repeat": 2, "background_load": 1, "host_cpus": 2, "target_error_pct": 10.0,
            "passed_repeats": 1, "pass": False, "wall_s": 1.0, "throttle_reason": "", "spread": s,
            "rows": [dict(r, predicted_frac=0.5, reference_steps_per_s=300.0, predicted_steps_per_s=150.0,
                          measured_steps_per_s=151.0, measured_frac=0.503, cpu_cores_used=0.5, throttle="cgroup-v1",
                          draw_w=150.0) for r in repeats[-1]]}
    md = render(full)
    assert "| 450 | -11.0 | -5.0 | +1.0 |" in md and "repeats passed: 1/2" in md and "FAIL" in md


@pytest.mark.parametrize(("args", "field"), [(["--repeat", "0"], "--repeat"),
                                             (["--background-load", "99"], "--background-load")])
def test_bad_options_are_refused(tmp_path, capsys, args, field):
    assert main(["bench", "power", "--out", str(tmp_path / "o"), *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and field in err and not (tmp_path / "o").exists()
