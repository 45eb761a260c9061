"""CPU throttles without root: control-file writes on a fake cgroup tree, the duty-cycle
arithmetic with a fake clock, the factory's fallbacks, and the cleanup's name matching."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from testbed.power.errors import PowerError
from testbed.power.throttle.throttle import (
    KIND_DUTY, KIND_V1, KIND_V2, CgroupV1Throttle, CgroupV2Throttle, DutyCycleThrottle, ThrottleError,
    ThrottleUnavailable, cgroup_mounts, cgroup_name, find_run_cgroups, make_throttle, own_cgroup,
    remove_run_cgroups, run_of_cgroup,
)

RUN = "abc123"


def _rmtree_close(throttle, monkeypatch) -> None:
    """Close, with a plain directory standing in for cgroupfs (whose rmdir ignores its files)."""
    import shutil

    for f in throttle.path.iterdir():
        if f.name in ("tasks", "cgroup.procs"):
            f.write_text("")  # the tasks have left
    monkeypatch.setattr(Path, "rmdir", lambda p: shutil.rmtree(p))
    throttle.close()
    monkeypatch.undo()


def test_names():
    assert cgroup_name(RUN, "a-j1") == "tb-abc123-a-j1"
    assert run_of_cgroup(Path("/x/tb-abc123-a-j1")) == RUN
    assert run_of_cgroup(Path("/x/tb-doctor")) is None
    for bad in ("", "../x", "a/b", "-x"):
        with pytest.raises(ValueError):
            cgroup_name(RUN, bad)
    with pytest.raises(ValueError):
        cgroup_name("NOTRUN", "x")


def test_errors_are_power_errors():
    assert issubclass(ThrottleUnavailable, ThrottleError) and issubclass(ThrottleError, PowerError)


def test_mounts_and_own_cgroup(tmp_path):
    mounts = tmp_path / "mounts"
    mounts.write_text("cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,cpu,cpuacct 0 0\n"
                      "cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\nproc /proc proc rw 0 0\n")
    assert cgroup_mounts(mounts) == {"v1_cpu": Path("/sys/fs/cgroup/cpu,cpuacct"),
                                     "v2": Path("/sys/fs/cgroup/unified")}
    (tmp_path / "v1" / "user.slice").mkdir(parents=True)
    proc = tmp_path / "cgroup"
    proc.write_text("2:cpu,cpuacct:/user.slice\n1:memory:/x\n0::/gone\n")
    assert own_cgroup(tmp_path / "v1", 1, proc) == tmp_path / "v1" / "user.slice"
    assert own_cgroup(tmp_path / "v2", 2, proc) == tmp_path / "v2"  # /gone does not exist


def test_v1_writes_quota_period_and_tasks(tmp_path, monkeypatch):
    th = CgroupV1Throttle(RUN, "a-j1", parent=tmp_path)
    with pytest.raises(ThrottleError, match="not open"):
        th.set_cores(0.5)
    th.open()
    cg = tmp_path / "tb-abc123-a-j1"
    assert (cg / "cpu.cfs_quota_us").read_text() == "-1"
    assert (cg / "cpu.cfs_period_us").read_text() == "100000"
    th.set_cores(0.5)
    assert (cg / "cpu.cfs_quota_us").read_text() == "50000"
    th.set_cores(0.0001)  # floored at the kernel's 1 ms
    assert (cg / "cpu.cfs_quota_us").read_text() == "1000"
    th.set_cores(0.25, period_us=400_000)
    assert (cg / "cpu.cfs_period_us").read_text() == "400000"
    assert (cg / "cpu.cfs_quota_us").read_text() == "100000"
    assert th.describe()["cores"] == 0.25 and th.kind == KIND_V1
    th.set_cores(None)
    assert (cg / "cpu.cfs_quota_us").read_text() == "-1"
    th.add_tid(4242)
    assert (cg / "tasks").read_text() == "4242"
    th.add_pid(4343)
    assert (cg / "cgroup.procs").read_text() == "4343"
    for bad in (0, -1, float("nan")):
        with pytest.raises(ThrottleError, match="cores must be > 0"):
            th.set_cores(bad)
    with pytest.raises(ThrottleError, match="period_us"):
        th.set_cores(0.5, period_us=2_000_000)
    _rmtree_close(th, monkeypatch)
    assert not cg.exists()
    th.close()  # idempotent


def test_v1_refuses_an_existing_cgroup(tmp_path):
    (tmp_path / "tb-abc123-a-j1").mkdir()
    with pytest.raises(ThrottleError, match="already exists"):
        CgroupV1Throttle(RUN, "a-j1", parent=tmp_path).open()


def test_v2_cpu_max_and_processes_only(tmp_path, monkeypatch):
    (tmp_path / "cgroup.subtree_control").write_text("")
    th = CgroupV2Throttle(RUN, "bench", parent=tmp_path)
    th.open()
    assert (tmp_path / "cgroup.subtree_control").read_text() == "+cpu"
    cg = tmp_path / "tb-abc123-bench"
    assert (cg / "cpu.max").read_text() == "max 100000"
    th.set_cores(0.3)
    assert (cg / "cpu.max").read_text() == "30000 100000"
    th.add_pid(77)
    assert (cg / "cgroup.procs").read_text() == "77"
    with pytest.raises(ThrottleUnavailable, match="whole processes"):
        th.add_tid(78)
    th.prioritise()
    assert (cg / "cpu.weight").read_text() == "10000"
    assert th.kind == KIND_V2
    _rmtree_close(th, monkeypatch)


def test_v2_without_a_delegable_controller(tmp_path):
    th = CgroupV2Throttle(RUN, "x", parent=tmp_path / "missing")
    with pytest.raises(ThrottleUnavailable, match="cpu controller"):
        th.open()


class FakeClock:
    def __init__(self):
        self.t_s = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.t_s

    def sleep(self, s: float) -> None:
        self.slept.append(s)
        self.t_s += s * 1.1  # a sleep always overshoots a little


def test_duty_cycle_runs_frac_of_the_time():
    clock = FakeClock()
    th = DutyCycleThrottle(sleep=clock.sleep, clock=clock)
    assert th.after_step(0.01) == 0.0  # unlimited
    th.set_cores(0.25)
    busy_s = 0.0
    for _ in range(1000):
        clock.t_s += 0.004
        busy_s += 0.004
        th.after_step(0.004)
    # sleeps come in chunks of about (1 - 0.25) of a period, never after every step
    assert 0 < len(clock.slept) < 200 and min(clock.slept) >= 0.075  # 1000 steps
    assert busy_s / clock.t_s == pytest.approx(0.25, rel=0.02)  # overshoot is paid back
    assert th.sleep_for_s(0.01) == pytest.approx(0.03)
    th.set_cores(1.0)
    assert th.after_step(0.01) == 0.0
    with pytest.raises(ThrottleError):
        th.set_cores(-1)


def test_duty_cycle_only_throttles_its_own_process():
    th = DutyCycleThrottle()
    th.add_pid(os.getpid())
    th.add_tid(__import__("threading").get_native_id())
    with pytest.raises(ThrottleUnavailable, match="this process"):
        th.add_pid(1 if os.getpid() != 1 else 2)
    with pytest.raises(ThrottleUnavailable):
        th.add_tid(2 ** 30)
    assert th.kind == KIND_DUTY


def test_factory_falls_back_and_says_why(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    th = make_throttle(RUN, "x", mounts={"v1_cpu": tmp_path})
    assert th.kind == KIND_DUTY and "needs root" in th.reason
    with pytest.raises(ThrottleUnavailable, match="needs root"):
        make_throttle(RUN, "x", prefer=KIND_V1, mounts={"v1_cpu": tmp_path})
    with pytest.raises(ThrottleError, match="unknown throttle kind"):
        make_throttle(RUN, "x", prefer="magic")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    (tmp_path / "cgroup.controllers").write_text("cpu memory\n")
    th = make_throttle(RUN, "x", threads=True, mounts={"v2": tmp_path})
    assert th.kind == KIND_DUTY
    assert "no v1 hierarchy" in th.reason and "single threads" in th.reason


def test_find_and_remove_only_this_runs_cgroups(tmp_path):
    v1, v2 = tmp_path / "cpu", tmp_path / "unified"
    mine = [v1 / "tb-abc123-a-j1", v1 / "system.slice" / "tb-abc123-bench-power", v2 / "tb-abc123-x"]
    others = [v1 / "tb-zzz999-a-j1", v1 / "tb-doctor", v1 / "user.slice", v2 / "abc123"]
    for d in mine + others:
        d.mkdir(parents=True)
    mounts = {"v1_cpu": v1, "v2": v2}
    assert sorted(p for _, p in find_run_cgroups(RUN, mounts=mounts)) == sorted(mine)
    assert {run_of_cgroup(p) for _, p in find_run_cgroups(mounts=mounts)} == {RUN, "zzz999"}
    removed = remove_run_cgroups(RUN, mounts=mounts)
    assert sorted(removed) == sorted(str(p) for p in mine)
    assert not any(p.exists() for p in mine) and all(p.exists() for p in others)
    assert remove_run_cgroups(RUN, mounts=mounts) == []
