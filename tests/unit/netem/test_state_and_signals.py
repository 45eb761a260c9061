"""Run state files (only testbed's, validated; strays reported, never acted on), the ownership rules
``clean`` applies to listed paths, and the signal policy of teardown (no privileges needed)."""

from __future__ import annotations

import json
import os
import signal
import tempfile
from pathlib import Path

import pytest

from testbed import lifecycle
from testbed.netem.owned import clean, state

RUN = "abc123"


@pytest.fixture
def state_dir(tmp_path, monkeypatch):
    d = tmp_path / "state"
    monkeypatch.setattr(state, "STATE_DIR", d)
    return d


def test_add_discard_and_the_marker(state_dir):
    state.add(RUN, namespaces=["tb-abc123-a"], tmp_dirs=["/tmp/tb-abc123-x"])
    state.add(RUN, pids=[42], namespaces=["tb-abc123-a"])  # no duplicates
    data = json.loads((state_dir / f"{RUN}.json").read_text())
    assert data["format"] == "testbed-state/1" and data["run_id"] == RUN and data["owner_pid"] == os.getpid()
    assert data["namespaces"] == ["tb-abc123-a"] and data["pids"] == [42]
    assert state.all_runs() == [RUN]
    state.discard(RUN, namespaces=["tb-abc123-a"], pids=[42])
    assert state.read(RUN)["tmp_dirs"] == ["/tmp/tb-abc123-x"]
    state.discard(RUN, tmp_dirs=["/tmp/tb-abc123-x"])  # nothing listed any more: the file goes
    assert not (state_dir / f"{RUN}.json").exists() and state.all_runs() == []


def test_a_foreign_file_with_a_run_name_is_never_overwritten(state_dir):
    state_dir.mkdir()
    (state_dir / f"{RUN}.json").write_text("not ours")
    with pytest.raises(state.StateFileError):
        state.add(RUN, namespaces=["tb-abc123-a"])
    state.discard(RUN, namespaces=["tb-abc123-a"])
    assert (state_dir / f"{RUN}.json").read_text() == "not ours"


def test_listed_is_a_no_op_without_a_run_id(state_dir):
    with state.listed(None, partial_dirs=["/x/.r.partial-1"]):
        assert not state_dir.exists()
    with state.listed(RUN, partial_dirs=["/x/.r.partial-1"]):
        assert state.read(RUN)["partial_dirs"] == ["/x/.r.partial-1"]
    assert state.read(RUN) is None


@pytest.mark.parametrize(("data", "why"), [
    ([], "not a JSON object"),
    ({"run_id": RUN, "purpose": "run", "owner_pid": 1}, "no testbed marker"),
    ({"format": "testbed-state/1", "run_id": "zzz999", "purpose": "run", "owner_pid": 1}, "does not match"),
    ({"format": "testbed-state/1", "run_id": RUN, "purpose": "other", "owner_pid": 1}, "purpose"),
    ({"format": "testbed-state/1", "run_id": RUN, "purpose": "run", "owner_pid": "1"}, "owner_pid"),
    ({"format": "testbed-state/1", "run_id": RUN, "purpose": "run", "owner_pid": 1, "pids": ["1"]}, "pids"),
    ({"format": "testbed-state/1", "run_id": RUN, "purpose": "run", "owner_pid": 1, "tmp_dirs": "/tmp"}, "tmp_dirs"),
])
def test_validate_refuses_what_testbed_did_not_write(data, why):
    with pytest.raises(state.StateFileError, match=why):
        state.validate(RUN, data)


def test_scan_reports_strays_and_never_raises(state_dir, tmp_path):
    state.add(RUN, namespaces=["tb-abc123-a"])
    (state_dir / "notes.txt").write_text("hello")
    (state_dir / "bbb222.json").write_text("{not json")
    (state_dir / "ccc333.json").write_text(json.dumps({"run_id": "ccc333", "namespaces": ["tb-ccc333-a"]}))
    (state_dir / "ddd444.json").write_text(json.dumps({**state.record("eee555", purpose="run")}))  # wrong id
    (state_dir / "fff666.json").symlink_to(state_dir / f"{RUN}.json")
    (state_dir / "ggg777.json").mkdir()
    (state_dir / ".abc123.json.tmp-1-2").write_text("{")  # a write cut short: not a stray
    runs, strays = state.scan()
    assert list(runs) == [RUN]
    why = {s.path.name: s.reason for s in strays}
    assert set(why) == {"notes.txt", "bbb222.json", "ccc333.json", "ddd444.json", "fff666.json", "ggg777.json"}
    assert "not valid JSON" in why["bbb222.json"] and "marker" in why["ccc333.json"]
    assert "match" in why["ddd444.json"] and "opened" in why["fff666.json"]
    assert "hello" not in " ".join(why.values())  # never echo a file's contents
    assert clean.runs_present() == [RUN]
    assert [s.path.name for s in clean.strays()] == sorted(why)


def test_clean_without_a_valid_state_file_touches_nothing(state_dir):
    state_dir.mkdir()
    (state_dir / f"{RUN}.json").write_text(json.dumps({"run_id": RUN, "namespaces": ["tb-abc123-a"]}))
    rep = clean.clean_run(RUN, force=True)
    assert rep.skipped and "not a valid testbed state file" in rep.skipped
    assert (state_dir / f"{RUN}.json").exists()
    assert clean.clean_run("zzz999").skipped.startswith("no state file")


def test_tmp_dirs_only_real_directories_of_the_run_under_the_temp_dir(tmp_path):
    base = Path(tempfile.gettempdir())
    ours = base / f"tb-{RUN}-unit{os.getpid()}"
    ours.mkdir()
    (ours / "token").write_text("secret")
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "data").write_text("keep")
    link = base / f"tb-{RUN}-link{os.getpid()}"
    link.symlink_to(precious)
    other_prefix = base / f"tb-zzz999-unit{os.getpid()}"
    other_prefix.mkdir()
    try:
        rep = clean.CleanReport(RUN)
        clean._remove_tmp_dirs([str(precious), str(link), str(other_prefix), str(ours), "/etc"], RUN, rep)
        assert not ours.exists() and rep.paths == [str(ours)]
        assert (precious / "data").read_text() == "keep" and link.is_symlink() and other_prefix.is_dir()
        assert len(rep.refused) == 4 and not rep.errors
    finally:
        link.unlink(missing_ok=True)
        other_prefix.rmdir()


def test_partial_dirs_only_real_directories_with_the_writers_name(tmp_path):
    partial = tmp_path / ".r.partial-123"
    partial.mkdir()
    (partial / "x.parquet").write_text("x")
    plain = tmp_path / "results"
    plain.mkdir()
    fake = tmp_path / ".r.partial-9"
    fake.symlink_to(plain)
    rep = clean.CleanReport(RUN)
    clean._remove_partial_dirs([str(plain), str(fake), str(partial), "relative/.r.partial-1"], rep)
    assert not partial.exists() and plain.is_dir() and fake.is_symlink()
    assert rep.paths == [str(partial)] and len(rep.refused) == 2  # the relative one does not exist


def test_listed_names_must_carry_the_runs_prefix():
    rep = clean.CleanReport(RUN)
    clean._remove_namespaces(["tb-zzz999-a", "default", "../x"], RUN, rep)
    clean._remove_cgroups(["user.slice", "tb-zzz999-a", "tb-abc1234"], RUN, rep)
    assert len(rep.refused) == 6 and not rep.namespaces and not rep.cgroups


def test_zombies_count_as_dead():
    import subprocess
    import sys
    import time

    p = subprocess.Popen([sys.executable, "-c", "pass"])
    while True:  # exited but not reaped: a zombie
        try:
            import psutil

            if psutil.Process(p.pid).status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        time.sleep(0.01)
    assert not state.pid_alive(p.pid)
    rep = clean.CleanReport(RUN)
    clean._stop_pids([p.pid], RUN, rep)  # no ProcessLookupError, nothing to stop
    assert rep.pids == [] and rep.errors == []
    p.wait()


# -- signals ---------------------------------------------------------------------------------------

@pytest.fixture
def restore_signals(sigint_raises):
    saved = {s: signal.getsignal(s) for s in lifecycle.SIGNALS}
    yield
    for s, h in saved.items():
        signal.signal(s, h)


def test_critical_defers_and_then_raises(restore_signals):
    done = []
    with pytest.raises(KeyboardInterrupt):
        with lifecycle.critical():
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)
            done.append("all of it")
    assert done == ["all of it"]


def test_first_signal_raises_later_ones_wait_for_the_teardown(restore_signals):
    steps = []
    with lifecycle.handling_signals():
        try:
            os.kill(os.getpid(), signal.SIGINT)
            steps.append("not reached")
        except KeyboardInterrupt:
            steps.append("interrupted")
            with lifecycle.critical():  # a teardown
                os.kill(os.getpid(), signal.SIGINT)
                os.kill(os.getpid(), signal.SIGTERM)
                steps.append("torn down")
            os.kill(os.getpid(), signal.SIGINT)  # still unwinding: never raises again
            steps.append("after")
    assert steps == ["interrupted", "torn down", "after"]


def test_a_signal_during_a_clean_teardown_is_honoured_after_it(restore_signals):
    steps = []
    with lifecycle.handling_signals():
        with pytest.raises(SystemExit) as e:
            with lifecycle.critical():
                os.kill(os.getpid(), signal.SIGTERM)
                steps.append("torn down")
        assert e.value.code == 128 + signal.SIGTERM
    assert steps == ["torn down"]


def test_in_process_callers_get_their_handlers_back_after_a_signal(restore_signals):
    """A notebook or test calling the CLI in-process keeps its Ctrl-C after a signal ended a command;
    only the exiting console process ignores late signals."""
    before = signal.getsignal(signal.SIGINT)
    with lifecycle.handling_signals():
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is before
    with lifecycle.handling_signals(exiting=True):
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN


def test_the_ovs_device_a_run_made_goes_only_when_no_ovs_vswitchd_is_left(monkeypatch):
    import sys
    from types import SimpleNamespace

    deleted: list[int] = []

    class FakeIPRoute:
        def __enter__(self):
            return self

        def __exit__(self, *a):
            return False

        def link_lookup(self, ifname):
            return [7] if ifname == "ovs-netdev" else []

        def link(self, op, index):
            deleted.append(index)

    monkeypatch.setitem(sys.modules, "pyroute2", SimpleNamespace(IPRoute=FakeIPRoute))
    procs = [SimpleNamespace(pid=11, info={"name": "ovs-vswitchd"})]
    monkeypatch.setattr("psutil.process_iter", lambda attrs: iter(procs))
    rep = clean.CleanReport("abc123")
    clean._remove_ovs_netdev("ovs-netdev", rep)  # another ovs-vswitchd may use it: left alone
    assert deleted == [] and rep.refused and "PID 11" in rep.refused[0]
    procs.clear()
    rep = clean.CleanReport("abc123")
    clean._remove_ovs_netdev("ovs-netdev", rep)
    assert deleted == [7] and rep.interfaces == ["ovs-netdev"] and not rep.refused
    clean._remove_ovs_netdev(None, rep)  # the run made none (or the state names something else)
    clean._remove_ovs_netdev("eth0", rep)
    assert deleted == [7]
