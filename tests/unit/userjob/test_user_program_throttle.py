"""A user program's power cap, the parts that need no privileges: its progress lines read as
steps, and the cap recorded only (``throttle: none`` with the reason) where no cgroup can hold it."""

from __future__ import annotations

import json

import pytest

from testbed.spec.programs import Program
from testbed.userjob import throttle as uthrottle
from testbed.userjob.progress_tail import ProgressTail, parse_step
from testbed.userjob.runner import UserJobRunner


def test_progress_lines_become_steps_as_they_are_appended(tmp_path):
    path = tmp_path / "progress.jsonl"
    tail = ProgressTail(path)
    assert tail.poll() == [] and tail.step is None  # not there yet
    with open(path, "ab") as f:
        f.write(b'{"step": 0, "event": "started"}\n{"step": 1, "loss": 0.5}\n{"step": 2')  # the last one half-written
    assert tail.poll() == [0, 1] and tail.step == 1
    with open(path, "ab") as f:
        f.write(b', "loss": 0.4}\nnot json\n{"step": true}\n{"step": 2.5}\n[3]\n\n{"step": 7}\n')
    assert tail.poll() == [2, 7] and tail.step == 7
    assert tail.poll() == []
    path.write_text(json.dumps({"step": 3}) + "\n")  # replaced by a shorter file: read from the start
    assert tail.poll() == [3]
    with open(path, "a") as f:
        f.write('{"step": 4}\n')
    tail.skip_to_end()  # a restart: only what the new process appends counts
    assert tail.poll() == [] and tail.step == 3


def test_parse_step():
    assert parse_step(b'{"step": 12, "loss": 1}') == 12
    assert parse_step(b'{"step": "12"}') is None and parse_step(b"\xff") is None and parse_step(b"{}") is None


def _runner(tmp_path, run_id: str = "") -> UserJobRunner:
    return UserJobRunner(Program(command=["true"]), job_id="j1", job_dir=tmp_path / "j", ckpt_path=tmp_path / "c",
                         seed=1, steps_per_s=None, max_steps=None, run_id=run_id, throttle_tag="a-j1")


def test_without_a_run_id_the_cap_is_recorded_with_the_reason(tmp_path):
    r = _runner(tmp_path)
    res = r.set_throughput(0.5, cap_w=200.0)
    assert res["throttle"] == "none" and res["frac"] == 0.5 and res["window"] is None
    assert "cgroup" in res["throttle_reason"] and "no run id" in res["throttle_reason"]
    assert r.status()["throttle"] is None and r.status()["throughput_frac"] == 0.5
    with pytest.raises(ValueError, match="frac must be in"):
        r.set_throughput(1.5)


def test_not_root_means_no_cgroup_and_says_so(tmp_path, monkeypatch):
    import testbed.power.throttle.throttle as pthrottle

    monkeypatch.setattr(pthrottle.os, "geteuid", lambda: 1000)
    with pytest.raises(uthrottle.NoProgramThrottle, match="needs root"):
        uthrottle.open_program_throttle("abc123", "a-j1")
    res = _runner(tmp_path, "abc123").set_throughput(0.5)
    assert res["throttle"] == "none" and "needs root" in res["throttle_reason"]


def test_a_tag_no_cgroup_can_be_named_by_is_refused(tmp_path):
    with pytest.raises(uthrottle.NoProgramThrottle, match="tag"):
        uthrottle.open_program_throttle("abc123", "a/../../j1")


def test_the_quota_period_spans_two_steps_within_the_kernel_limits():
    assert uthrottle.quota_period_us(None) == 100_000
    assert uthrottle.quota_period_us(1000.0) == 100_000
    assert uthrottle.quota_period_us(10.0) == 200_000
    assert uthrottle.quota_period_us(0.5) == 1_000_000
