"""Delay relay without privileges: impairment validation, the schedule, the argv builder, stats."""

from __future__ import annotations

import json
import math
import statistics
import sys

import pytest

from testbed.netem.offload import is_relay_offload
from testbed.netem.relay.relay import (
    DirectionSchedule,
    PathImpairment,
    RelayStats,
    _parser,
    relay_argv,
    run_relay,
    schedule,
)

MS = 1_000_000


def test_impairment_defaults_and_units():
    p = PathImpairment()
    assert (p.delay_ms, p.jitter_ms, p.loss_pct) == (0, 0, 0)
    q = PathImpairment(delay_ms=12.5, jitter_ms=1, loss_pct=100)
    assert q.delay_ns == 12_500_000 and q.jitter_ns == 1e6


@pytest.mark.parametrize("kw", [
    {"delay_ms": -1}, {"jitter_ms": -0.1}, {"loss_pct": -1}, {"loss_pct": 100.5},
    {"delay_ms": math.nan}, {"delay_ms": math.inf},
])
def test_impairment_rejects_bad_values(kw):
    with pytest.raises(ValueError, match=next(iter(kw))):
        PathImpairment(**kw)


@pytest.mark.parametrize("kw", [{"delay_ms": "5"}, {"loss_pct": True}, {"jitter_ms": None}])
def test_impairment_rejects_non_numbers(kw):
    with pytest.raises(TypeError, match=next(iter(kw))):
        PathImpairment(**kw)


def test_impairment_is_frozen():
    with pytest.raises(AttributeError):
        PathImpairment().delay_ms = 3  # type: ignore[misc]


def test_fixed_delay_schedule_is_arrival_plus_delay():
    arrivals = [0, 1 * MS, 1 * MS, 7 * MS]
    assert schedule(arrivals, PathImpairment(delay_ms=20)) == [t + 20 * MS for t in arrivals]


def test_jitter_schedule_never_reorders_and_never_releases_early():
    arrivals = [i * 100_000 for i in range(5000)]  # 10 kframes/s, jitter 5 ms: constraint binds often
    out = schedule(arrivals, PathImpairment(delay_ms=10, jitter_ms=5), seed=3)
    assert all(b >= a for a, b in zip(out, out[1:], strict=False))
    assert all(r >= t for r, t in zip(out, arrivals, strict=True))  # clamp at zero delay


def test_jitter_schedule_sparse_stream_has_the_configured_spread():
    arrivals = [i * 50 * MS for i in range(4000)]  # 50 ms apart, jitter 2 ms: order never binds
    delays_ms = [(r - t) / MS for r, t in zip(schedule(arrivals, PathImpairment(10, 2), seed=1), arrivals, strict=True)]
    assert statistics.mean(delays_ms) == pytest.approx(10, abs=0.15)
    assert statistics.stdev(delays_ms) == pytest.approx(2, rel=0.06)


def test_dense_jitter_raises_the_mean_delay():
    """The documented cost of order preservation: at high rate the delay tends to a running max."""
    arrivals = [i * 100_000 for i in range(5000)]
    out = schedule(arrivals, PathImpairment(10, 2), seed=1)
    mean_ms = statistics.mean((r - t) / MS for r, t in zip(out, arrivals, strict=True))
    assert mean_ms > 11


def test_order_preserved_against_hand_computed_release():
    sched = DirectionSchedule(PathImpairment(delay_ms=10), 0, "ab")
    sched.last_release_ns = 50 * MS  # a previous frame is held until 50 ms
    assert sched.admit(0) == 50 * MS  # would be 10 ms: waits behind it
    assert sched.admit(45 * MS) == 55 * MS


def test_negative_samples_clamp_to_zero_delay():
    out = schedule([i * 10 * MS for i in range(2000)], PathImpairment(delay_ms=0, jitter_ms=5), seed=2)
    delays = [r - i * 10 * MS for i, r in enumerate(out)]
    assert min(delays) == 0 and sum(d == 0 for d in delays) > 500  # about half clamp


def test_loss_is_reproducible_from_seed_and_calibrated():
    arrivals = list(range(20_000))
    imp = PathImpairment(delay_ms=1, loss_pct=10)
    a = schedule(arrivals, imp, seed=7)
    assert a == schedule(arrivals, imp, seed=7)
    assert a != schedule(arrivals, imp, seed=8)
    assert [r is None for r in a] != [r is None for r in schedule(arrivals, imp, seed=7, direction="ba")]
    assert sum(r is None for r in a) / len(a) == pytest.approx(0.10, abs=0.006)


def test_loss_pattern_does_not_depend_on_jitter():
    arrivals = list(range(0, 5000 * MS, MS))
    plain = schedule(arrivals, PathImpairment(5, 0, 20), seed=4)
    jittered = schedule(arrivals, PathImpairment(5, 3, 20), seed=4)
    assert [r is None for r in plain] == [r is None for r in jittered]


def test_total_and_zero_loss():
    assert all(r is None for r in schedule(list(range(100)), PathImpairment(loss_pct=100)))
    assert all(r is not None for r in schedule(list(range(100)), PathImpairment(loss_pct=0)))


def test_argv_round_trips_through_the_parser():
    argv = relay_argv("ra", "rb", PathImpairment(20, 1.5, 0.1), PathImpairment(25, 0, 2), seed=9,
                      stats_path="/tmp/s.json", ready_file="/tmp/r")
    assert argv[:3] == [sys.executable, "-m", "testbed.netem.relay.relay"]
    a = _parser().parse_args(argv[3:])
    assert (a.if_a, a.if_b, a.seed, a.stats, a.ready_file) == ("ra", "rb", 9, "/tmp/s.json", "/tmp/r")
    assert (a.delay_ab_ms, a.jitter_ab_ms, a.loss_ab_pct) == (20, 1.5, 0.1)
    assert (a.delay_ba_ms, a.jitter_ba_ms, a.loss_ba_pct) == (25, 0, 2)


def test_argv_omits_optional_paths():
    argv = relay_argv("x", "y", PathImpairment(), PathImpairment(), seed=0)
    assert "--stats" not in argv and "--ready-file" not in argv


def test_parser_defaults_delay_ba_to_delay_ab():
    a = _parser().parse_args(["--if-a", "x", "--if-b", "y", "--delay-ab-ms", "7"])
    assert a.delay_ba_ms is None and a.jitter_ab_ms == 0 and a.seed == 0


def test_stats_json_round_trip(tmp_path):
    st = RelayStats(if_a="ra", if_b="rb")
    st.a_to_b.frames_in = 3
    path = tmp_path / "s.json"
    st.write(str(path))
    d = json.loads(path.read_text())
    assert d["a_to_b"]["frames_in"] == 3 and d["b_to_a"]["dropped_loss"] == 0 and d["if_b"] == "rb"


@pytest.mark.parametrize("name, switched", [
    ("tx-checksum-ip-generic", True), ("rx-checksum", True), ("tx-tcp-segmentation", True),
    ("tx-generic-segmentation", True), ("rx-gro", True), ("tx-gso-list", True),
    ("rx-vlan-hw-parse", True), ("tx-scatter-gather", False), ("highdma", False), ("tx-nocache-copy", False),
])
def test_offload_selection(name, switched):
    assert is_relay_offload(name) is switched


def test_argv_gso_flag():
    assert relay_argv("x", "y", PathImpairment(5), PathImpairment(5), seed=0, gso=True)[-1] == "--gso"
    assert _parser().parse_args(["--if-a", "x", "--if-b", "y", "--delay-ab-ms", "1", "--gso"]).gso


@pytest.mark.parametrize("kw, match", [
    ({"gso": True, "a_to_b": PathImpairment(loss_pct=1)}, "GSO"),
    ({"queue_limit_frames": 0}, "queue_limit_frames"),
])
def test_run_relay_rejects_bad_settings_before_opening_sockets(kw, match):
    args = {"a_to_b": PathImpairment(), "b_to_a": PathImpairment(), **kw}
    with pytest.raises(ValueError, match=match):
        run_relay("nonexistent0", "nonexistent1", args.pop("a_to_b"), args.pop("b_to_a"), **args)
