"""Emulation trials side by side on one machine (``testbed sweep --parallel N`` on netns): what keeps
them apart. Names are per run and addresses lie inside each run's own namespaces (so two runs may use
the same addresses); each trial gets a CPU-share cgroup listed in its run's state file before it is
made, removed after, and reclaimed by ``testbed clean`` when the trial's process died; too many
trials at once, or a substrate whose runs cannot share a machine, are refused naming the option."""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
import os
import shutil

import pytest

from testbed.cli import main
from testbed.errors import SpecError
from testbed.netem.owned import clean, state
from testbed.netem.fabric import Fabric
from testbed.netem.plan import LinkInput, plan_fabric
from testbed.netem.relay.relaypool import RELAY_PROCS_ENV
from testbed.studies import pace
from testbed.substrate import SUBSTRATES
from testbed.sweep import load_sweep_file, plan_sweep
from testbed.sweep.runner import parallel_for
from testbed.sweep.share import TAG, V1_SHARES, _cgroups, trial_share
from tests.unit.sweep_support import write_sweep

SITES = ["rome", "milan", "paris"]
LINKS = [LinkInput("rome", "milan", 100, 100, delay_ms=5), LinkInput("milan", "paris", 50, 50),
         LinkInput("rome", "paris", 10, 10, delay_ms=20)]


@pytest.fixture
def state_dir(tmp_path, monkeypatch):
    d = tmp_path / "state"
    monkeypatch.setattr(state, "STATE_DIR", d)
    return d


@pytest.fixture
def fake_v1(tmp_path, monkeypatch):
    """A cgroup v1 'cpu' hierarchy in a folder: the parent's real-time runtime as the kernel's default;
    removing a cgroup removes its folder (a real cgroup's control files do not stop rmdir)."""
    mount = tmp_path / "cpu"
    mount.mkdir()
    (mount / "cpu.rt_runtime_us").write_text("950000\n")
    cg = _cgroups()
    monkeypatch.setattr(cg, "release_cgroup", lambda path, tasks_file="tasks", **kw: shutil.rmtree(path))
    monkeypatch.setattr(cg, "own_cgroup", lambda m, version, **kw: m)
    return mount


def test_two_runs_share_no_name_and_their_addresses_are_namespace_local():
    a, b = (plan_fabric(run, SITES, LINKS, "relay") for run in ("aaaaa1", "bbbbb2"))
    assert set(a.namespaces()).isdisjoint(b.namespaces())
    ifs = lambda p: {i for link in p.links for i in (link.if_a, link.if_b, link.if_ra, link.if_rb) if i} \
        | {i for s in p.sites for i in (s.mgmt_if, s.mgmt_peer_if)} | {p.mgmt_bridge, p.ctl_if, p.ctl_peer_if}
    assert ifs(a).isdisjoint(ifs(b)) and all(i.startswith("tbaaaaa1") for i in ifs(a))
    # the same addresses in both runs: they can be, since the netns fabric makes nothing in the root
    # namespace (every interface, address and route is made inside the plan's namespaces)
    assert [s.addr for s in a.sites] == [s.addr for s in b.sites]
    assert Fabric(a)._root_interfaces() == [] and Fabric(b)._root_interfaces() == []
    assert _cgroups().cgroup_name("aaaaa1", TAG) != _cgroups().cgroup_name("bbbbb2", TAG)


def test_substrates_say_whether_their_runs_can_share_a_machine():
    assert SUBSTRATES.get("netns").parallel_problem() is None
    assert SUBSTRATES.get("sim").parallel_problem() is None
    assert "Open vSwitch" in SUBSTRATES.get("mininet").parallel_problem()
    assert "loopback" in SUBSTRATES.get("local").parallel_problem()


def test_two_trials_get_disjoint_cgroups_listed_first_and_removed_after(state_dir, fake_v1, monkeypatch):
    monkeypatch.delenv(RELAY_PROCS_ENV, raising=False)
    monkeypatch.delenv(pace.NO_RECORD_ENV, raising=False)
    env_a, env_b = dict(os.environ), dict(os.environ)
    mounts = {"v1_cpu": fake_v1}
    with trial_share("aaaaa1", 2, mounts=mounts, cpus=2, env=env_a, pid=101) as a, \
            trial_share("bbbbb2", 2, mounts=mounts, cpus=2, env=env_b, pid=102) as b:
        assert a.cgroup != b.cgroup and a.why is None and b.why is None
        for share, run, pid in ((a, "aaaaa1", 101), (b, "bbbbb2", 102)):
            path = fake_v1 / f"tb-{run}-trial"
            assert share.cgroup == str(path) and share.version == 1
            assert (path / "cgroup.procs").read_text() == str(pid)
            assert (path / "cpu.shares").read_text() == str(V1_SHARES) == str(share.weight)
            # half the parent's real-time runtime each: the delay relays keep their SCHED_FIFO priority
            assert (path / "cpu.rt_runtime_us").read_text() == "475000" and share.rt_runtime_us == 475000
            assert state.load(run)["cgroups"] == [f"tb-{run}-trial"]
        assert env_a[RELAY_PROCS_ENV] == env_b[RELAY_PROCS_ENV] == "1" and a.relay_procs == 1  # 2 CPUs / 2 trials
        assert env_a[pace.NO_RECORD_ENV] == "1"  # a trial beside others does not update the pace cache
    assert not list(fake_v1.glob("tb-*")) and state.all_runs() == []
    assert RELAY_PROCS_ENV not in env_a and pace.NO_RECORD_ENV not in env_a  # restored


def test_a_relay_pool_size_set_by_the_user_is_kept(state_dir, fake_v1):
    env = {RELAY_PROCS_ENV: "3"}
    with trial_share("ccccc3", 2, mounts={"v1_cpu": fake_v1}, cpus=2, env=env, pid=1) as share:
        assert env[RELAY_PROCS_ENV] == "3" and share.relay_procs == 3
    assert env == {RELAY_PROCS_ENV: "3"}


def test_without_a_cpu_controller_the_trial_runs_and_says_why(state_dir):
    env: dict = {}
    with trial_share("ddddd4", 2, mounts={}, cpus=4, env=env, pid=1) as share:
        assert share.cgroup is None and "no cgroup hierarchy" in share.why and env[RELAY_PROCS_ENV] == "2"
    assert state.all_runs() == []


def _crash_inside_share(mount, state_dir, run_id) -> None:
    state.STATE_DIR = state_dir
    cg = _cgroups()
    cg.own_cgroup = lambda m, version, **kw: m
    with trial_share(run_id, 2, mounts={"v1_cpu": mount}, cpus=2, env={}, pid=1):
        for f in mount.glob(f"tb-{run_id}-trial/*"):  # left as an empty folder: a real cgroup's files go with it
            f.unlink()
        os._exit(9)  # killed inside the block: nothing of the share's teardown runs


def test_a_crashed_trials_cgroup_is_reclaimed_by_testbed_clean(state_dir, fake_v1, monkeypatch):
    run_id = "eeeee5"
    proc = mp.get_context("fork").Process(target=_crash_inside_share, args=(fake_v1, state_dir, run_id))
    proc.start()
    proc.join(30)
    assert proc.exitcode == 9
    assert (fake_v1 / f"tb-{run_id}-trial").is_dir() and state.load(run_id)["cgroups"] == [f"tb-{run_id}-trial"]
    cg = _cgroups()
    monkeypatch.setattr(cg, "all_hierarchies", lambda *a, **kw: [(1, fake_v1)])
    monkeypatch.setattr(cg, "release_named", lambda version, path: path.rmdir())
    rep = clean.clean_run(run_id)  # its owner is dead: no --force needed
    assert rep.ok and rep.cgroups == [str(fake_v1 / f"tb-{run_id}-trial")], rep
    assert not (fake_v1 / f"tb-{run_id}-trial").exists() and state.all_runs() == []


def _netns_sweep(tmp_path, **sweep):
    return write_sweep(tmp_path, {"substrate": "netns", "seeds": 2, "grid": {"links[0].bandwidth_gbps": [1]}, **sweep})


def test_more_parallel_emulations_than_cpus_are_refused_naming_the_option(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    path = _netns_sweep(tmp_path)
    assert main(["sweep", str(path), "--parallel", "3", "--dry-run"]) == 2
    assert ("--parallel: 3 netns trials at once need at least 3 CPUs and this machine has 2: at most 2"
            in capsys.readouterr().err)
    assert main(["sweep", str(path), "--parallel", "2", "--dry-run"]) == 0
    assert "(2 at a time locally)" in capsys.readouterr().out
    assert main(["sweep", str(path), "--dry-run"]) == 0  # sequential stays the default
    assert "(1 at a time locally)" in capsys.readouterr().out
    from_file = _netns_sweep(tmp_path / "f", parallel=4)
    with pytest.raises(SpecError) as e:
        parallel_for(plan_sweep(load_sweep_file(from_file)), None, 2)
    assert e.value.lines()[0].startswith(f"{from_file}: parallel: 4 netns trials at once")


def test_a_substrate_whose_runs_cannot_share_a_machine_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 8)
    plan = dataclasses.replace(plan_sweep(load_sweep_file(_netns_sweep(tmp_path))), substrate="local")
    with pytest.raises(SpecError) as e:
        parallel_for(plan, 2, 2)
    assert e.value.lines() == ["--parallel: local trials run one at a time on one machine (its node agent listens "
                               "on fixed ports of this host's loopback); got 2: use 1"]
    assert parallel_for(plan, 1, 2) == (1, None)


def test_trials_with_a_private_docker_engine_are_refused(tmp_path, monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 8)
    path = _netns_sweep(tmp_path, variants=[{"name": "docker", "set": {"emulation.nodes": "agents", "emulation.runtime": "docker"}}])
    with pytest.raises(SpecError) as e:
        parallel_for(plan_sweep(load_sweep_file(path)), 2, 2)
    assert e.value.lines()[0].startswith("--parallel: trials with emulation.runtime docker run one at a time")


def test_pace_is_not_recorded_by_a_trial_beside_others(tmp_path, monkeypatch):
    monkeypatch.setenv(pace.CACHE_ENV, str(tmp_path / "pace.json"))
    monkeypatch.setenv(pace.NO_RECORD_ENV, "1")
    assert pace.record("netns", "ballast", steps=200, wall_s=10.0, transfer_wall_s=1.0) is None
    pace.record_finish("netns", "ballast", 1.0)
    assert not (tmp_path / "pace.json").exists()
    monkeypatch.delenv(pace.NO_RECORD_ENV)
    assert pace.record("netns", "ballast", steps=200, wall_s=10.0, transfer_wall_s=1.0) == pytest.approx(0.045)
    assert (tmp_path / "pace.json").exists() and (tmp_path / "pace.json.lock").exists()
