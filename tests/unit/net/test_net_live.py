"""Live changes of a held network and the replay plan (no privileges: pure parts only)."""

from __future__ import annotations

import json
import re

import pytest

from testbed.errors import SpecError
from testbed.netem.live import LinkChange, check_change, current, directions, impairment_problem, resolve_link, updated
from testbed.netem.relay.relay import DirectionSchedule, PathImpairment, read_control, relay_argv

LINK = {"key": "rome-milan", "a": "rome", "b": "milan", "rate_ab_mbit": 100.0, "rate_ba_mbit": 80.0,
        "delay_ms": 15.0, "jitter_ms": 0.0, "loss_pct": 0.0}

REPLAY_SCENARIO = """
name: replay-two
seed: 1
duration_h: 1
step_s: 60
emulation: {time_scale: 100, byte_scale: 0.01}
sites:
  - {name: left, lat_deg: 45.0, lon_deg: 9.0}
  - {name: right, lat_deg: 48.0, lon_deg: 11.0}
links:
  - {a: left, b: right, bandwidth_gbps: 0.1, latency_ms: 500}
traces:
  renewable:
    default: {kind: curtailment_windows, capacity_kw: 1.5, mean_window_h: 2.5, windows_per_day: 2}
  bandwidth:
    default: {kind: variance, cv: 0}
    events:
      - {link: left-right, start_h: 0.5, duration_h: 0.25, degradation_pct: 60}
policies: [static]
workloads:
  arrivals: {kind: poisson, jobs_per_day: 8, until_h: 1}
  mix:
    - {family: resnet50, checkpoint_gb: 24, work_gpu_h: [2, 8]}
"""


def test_change_values_are_checked_with_the_option_named():
    with pytest.raises(SpecError, match="nothing to change"):
        check_change(LinkChange())
    for ch, opt in ((LinkChange(bandwidth_mbit=0), "--bandwidth-mbit"), (LinkChange(delay_ms=-1), "--delay-ms"),
                    (LinkChange(loss_pct=101), "--loss-pct"), (LinkChange(jitter_ms=float("nan")), "--jitter-ms")):
        with pytest.raises(SpecError) as e:
            check_change(ch)
        assert e.value.problems[0][0] == opt
    check_change(LinkChange(bandwidth_mbit=40, delay_ms=0, loss_pct=100))


def test_links_and_directions_resolve_either_way():
    assert resolve_link([LINK], "milan-rome") is LINK
    with pytest.raises(SpecError, match="unknown link 'rome-paris'"):
        resolve_link([LINK], "rome-paris")
    assert directions(LINK, "both") == ["ab", "ba"]
    assert directions(LINK, "b->a") == ["ba"]
    assert directions(LINK, "rome->milan") == ["ab"] and directions(LINK, "milan->rome") == ["ba"]
    with pytest.raises(SpecError, match="--direction"):
        directions(LINK, "rome->paris")


def test_update_touches_only_the_given_direction_and_values():
    new = updated(LINK, LinkChange(bandwidth_mbit=40, delay_ms=30, direction="milan->rome"))
    assert new["rate_ab_mbit"] == 100 and new["rate_ba_mbit"] == 40
    assert new["delay_ab_ms"] == 15 and new["delay_ba_ms"] == 30
    assert current(LINK)["loss_ba_pct"] == 0 and new["jitter_ab_ms"] == 0


def test_impairment_changes_need_a_delay_stage():
    old = current(LINK)
    rate_only = updated(LINK, LinkChange(bandwidth_mbit=10))
    delayed = updated(LINK, LinkChange(delay_ms=40))
    lossy = updated(LINK, LinkChange(loss_pct=1))
    assert impairment_problem(LINK, {}, "relay", old, rate_only) is None  # bandwidth: always in place
    assert "built without a delay stage" in impairment_problem(LINK, {}, "relay", old, delayed)
    assert "built without a delay stage" in impairment_problem(LINK, {"netem": False}, "netem", old, delayed)
    assert impairment_problem(LINK, {"netem": True}, "netem", old, delayed) is None
    assert impairment_problem(LINK, {"relay_pid": 7}, "relay", old, lossy) is None
    assert "cannot drop single packets" in impairment_problem(LINK, {"relay_pid": 7, "relay_gso": True}, "relay",
                                                              old, lossy)
    # the compiled relay drops single segments of a super-frame: loss can be set on its GSO links
    assert impairment_problem(LINK, {"relay_pid": 7, "relay_gso": True, "relay_gso_loss": True}, "relay",
                              old, lossy) is None


def test_relay_schedule_takes_new_impairments_in_place(tmp_path):
    sched = DirectionSchedule(PathImpairment(delay_ms=10), seed=0, direction="ab")
    assert sched.admit(0) == 10_000_000
    sched.update(PathImpairment(delay_ms=40))
    assert sched.admit(1_000_000_000) == 1_040_000_000
    sched.update(PathImpairment(delay_ms=5))  # order kept: never released before a held frame
    assert sched.admit(1_000_000_001) == 1_040_000_000
    f = tmp_path / "c.json"
    f.write_text(json.dumps({"a_to_b": {"delay_ms": 30, "jitter_ms": 1, "loss_pct": 2},
                             "b_to_a": {"delay_ms": 15, "jitter_ms": 0, "loss_pct": 0}}))
    ab, ba = read_control(str(f), gso=False)
    assert ab == PathImpairment(30, 1, 2) and ba.delay_ms == 15
    with pytest.raises(ValueError, match="GSO"):
        read_control(str(f), gso=True)
    f.write_text(json.dumps({"a_to_b": {"delay_ms": -1}, "b_to_a": {}}))
    with pytest.raises(ValueError):
        read_control(str(f), gso=False)
    argv = relay_argv("x", "y", PathImpairment(1), PathImpairment(1), seed=0, control_path="/tmp/c.json")
    assert argv[-2:] == ["--control", "/tmp/c.json"]


def test_replay_plan_is_the_scenario_traces_at_the_runs_scaling(tmp_path):
    from testbed.net.held import plan_held

    f = tmp_path / "replay.yaml"
    f.write_text(REPLAY_SCENARIO)
    held = plan_held(f, "abc123", "relay", replay=True)
    assert held.time_scale == 100 and held.duration_s == 3600
    assert held.plan.links[0].rate_ab_mbit == pytest.approx(100.0)  # 0.1 Gbit/s x 0.01 x 100
    assert held.plan.links[0].delay_ms == pytest.approx(5.0)  # 500 ms / 100
    changes = [(c.t_s, c.src, c.dst, round(c.rate_mbit, 6)) for c in held.changes]
    assert changes == [(1800.0, "left", "right", 40.0), (1800.0, "right", "left", 40.0),
                       (2700.0, "left", "right", 100.0), (2700.0, "right", "left", 100.0)]
    topo = tmp_path / "topo.yaml"
    topo.write_text("name: t\nsites:\n  - {name: a, lat_deg: 1, lon_deg: 1}\n  - {name: b, lat_deg: 2, lon_deg: 2}\n"
                    "links:\n  - {a: a, b: b, bandwidth_gbps: 1}\n")
    with pytest.raises(SpecError, match="replay needs a scenario"):
        plan_held(topo, "abc123", "relay", replay=True)
    assert plan_held(topo, "abc123", "relay", replay=False).changes == []


def test_status_shows_live_values_per_direction():
    from testbed.cli.cmd_net import status_lines

    st = {"run_id": "abc123", "purpose": "net", "relays_alive": 1, "pids": [1], "sites": {},
          "links": [{**LINK, **updated(LINK, LinkChange(bandwidth_mbit=40, delay_ms=30, direction="a->b"))},
                    {**LINK, "key": "rome-paris", "b": "paris", **updated(LINK, LinkChange(bandwidth_mbit=40))}],
          "replay": {"applied": 2, "changes": 4, "time_scale": 100,
                     "last": {"src": "rome", "dst": "milan", "rate_mbit": 40, "t_s": 1800.5}}}
    text = "\n".join(status_lines([st]))
    assert "rome->milan 40 Mbit/s delay 30 ms" in text and "milan->rome 80 Mbit/s delay 15 ms" in text
    assert re.search(r"link rome-paris\s+40/40 Mbit/s\s+delay 15.00 ms", text)  # same both ways: one summary
    assert "replay: 2/4 changes applied" in text and "rome->milan 40 Mbit/s at t=1800.5 s" in text
