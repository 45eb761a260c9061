"""Process supervision (testbed.processes, nsexec.terminate): zombies, SIGKILL, many at once.

No privileges needed. Assertions are on behaviour (who was reaped, which path was taken, how the
waits were grouped), never on wall-clock time."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil
import pytest

from testbed import processes
from testbed.netem.nsexec import terminate
from testbed.processes import owned_processes, stop_processes

PY = sys.executable
SLEEPER = [PY, "-c", "import time; print('ready', flush=True); time.sleep(120)"]
STUBBORN = [PY, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "print('ready', flush=True); time.sleep(120)"]


def _start(argv: list[str]) -> subprocess.Popen:
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    with p.stdout:
        assert p.stdout.readline().strip() == b"ready"  # its signal handler is installed
    return p


def _until_zombie(pid: int) -> None:
    deadline = time.monotonic() + 30
    while psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, f"{pid} did not exit"
        time.sleep(0.01)


@pytest.fixture
def spy(monkeypatch):
    """Records every wait_ended call (the processes it got) and every signal sent."""
    calls = {"wait": [], "kill": [], "terminate": []}
    real_wait = processes.wait_ended

    def wait(procs, timeout_s):
        procs = list(procs)
        calls["wait"].append(sorted(p.pid for p in procs))
        return real_wait(procs, timeout_s)

    monkeypatch.setattr(processes, "wait_ended", wait)
    for how in ("kill", "terminate"):
        real = getattr(psutil.Process, how)

        def record(self, _real=real, _how=how):
            calls[_how].append(self.pid)
            return _real(self)

        monkeypatch.setattr(psutil.Process, how, record)
    return calls


def test_exited_child_is_reaped_not_waited_for(spy):
    p = subprocess.Popen([PY, "-c", "raise SystemExit(7)"])
    _until_zombie(p.pid)  # exited, not reaped: kill(pid, 0) would still say "alive"
    rep = terminate([p], timeout_s=60)
    assert rep.already_gone == [p.pid] and not rep.terminated and not rep.killed
    assert p.returncode == 7  # reaped by us, exit code handed to the Popen
    assert not psutil.pid_exists(p.pid)
    assert spy["terminate"] == [] and spy["kill"] == []  # nothing signalled, no SIGTERM wait
    assert all(pids == [] for pids in spy["wait"])


def test_child_exiting_on_sigterm_is_reaped_with_its_status(spy):
    p = _start(SLEEPER)
    rep = terminate([p], timeout_s=60)
    assert rep.terminated == [p.pid] and not rep.killed and not rep.survivors
    assert p.returncode == -15
    assert not psutil.pid_exists(p.pid)
    assert spy["kill"] == []


def test_child_ignoring_sigterm_is_killed_after_the_timeout(spy):
    p = _start(STUBBORN)
    rep = terminate([p], timeout_s=0.3)
    assert spy["terminate"] == [p.pid] and spy["kill"] == [p.pid]
    assert rep.killed == [p.pid] and not rep.terminated and not rep.survivors
    assert p.returncode == -9
    assert not psutil.pid_exists(p.pid)


def test_many_processes_are_waited_together(spy):
    polite = [_start(SLEEPER) for _ in range(12)]
    stubborn = [_start(STUBBORN) for _ in range(3)]
    quick = subprocess.Popen([PY, "-c", "pass"])
    _until_zombie(quick.pid)
    everyone = polite + stubborn + [quick]
    rep = terminate(everyone, timeout_s=0.5)
    # one SIGTERM round for all, one common wait, one SIGKILL round for exactly the stubborn ones
    assert sorted(spy["terminate"]) == sorted(p.pid for p in polite + stubborn)
    assert spy["wait"][0] == sorted(p.pid for p in polite + stubborn)
    assert sorted(spy["kill"]) == sorted(p.pid for p in stubborn)
    assert spy["wait"][1] == sorted(p.pid for p in stubborn)
    assert len(spy["wait"]) == 2
    assert sorted(rep.terminated) == sorted(p.pid for p in polite)
    assert sorted(rep.killed) == sorted(p.pid for p in stubborn)
    assert rep.already_gone == [quick.pid]
    assert [p.returncode for p in polite] == [-15] * 12
    assert [p.returncode for p in stubborn] == [-9] * 3
    assert quick.returncode == 0
    assert not any(psutil.pid_exists(p.pid) for p in everyone)


def test_terminate_of_nothing_or_finished_processes_is_a_no_op():
    p = subprocess.Popen([PY, "-c", "pass"])
    p.wait()
    rep = terminate([p])
    assert rep.terminated == [] and rep.killed == [] and rep.already_gone == []
    assert terminate([]).terminated == []


ORPHAN_PARENT = [PY, "-c", """
import os, sys, time
pid = os.fork()
if pid == 0:
    os.execvp(sys.executable, [sys.executable, "-c", "import time; time.sleep(120)"])
print(pid, flush=True)
time.sleep(120)  # never reaps its child
"""]


def test_a_zombie_that_is_not_our_child_counts_as_ended(spy):
    """Like a relay left by `testbed net up` under an init that does not reap: after SIGTERM it is
    a zombie forever; it must count as ended (no timeout, no SIGKILL)."""
    parent = subprocess.Popen(ORPHAN_PARENT, stdout=subprocess.PIPE)
    try:
        with parent.stdout:
            grandchild = psutil.Process(int(parent.stdout.readline()))
        rep = stop_processes([grandchild], timeout_s=60)
        assert rep.terminated == [grandchild.pid] and not rep.killed
        assert rep.returncodes[grandchild.pid] is None  # not ours: its status is its parent's
        assert grandchild.status() == psutil.STATUS_ZOMBIE  # still there, but ended
        assert spy["kill"] == []
        # and stopping it again finds it already gone
        assert stop_processes([grandchild], timeout_s=60).already_gone == [grandchild.pid]
    finally:
        parent.kill()
        parent.wait()


def test_owned_processes_checks_the_command_line_and_skips_zombies():
    mine = subprocess.Popen([PY, "-c", "import time; time.sleep(120)", "tb-run-abc123"])
    other = subprocess.Popen([PY, "-c", "import time; time.sleep(120)"])
    done = subprocess.Popen([PY, "-c", "pass", "tb-run-abc123"])
    try:
        _until_zombie(done.pid)
        found = owned_processes([mine.pid, other.pid, done.pid, 2**22 + 7], "tb-run-abc123")
        assert [p.pid for p in found] == [mine.pid]
    finally:
        rep = terminate([mine, other, done])
    assert sorted(rep.terminated) == sorted([mine.pid, other.pid])


def test_our_child_that_is_a_zombie_while_its_threads_exit_is_reaped():
    import ctypes.util  # noqa: F401  (the child uses it)
    import sys

    from testbed.processes import ended

    # the child's main thread exits first (pthread_exit): the process shows as a zombie while its
    # other thread still runs, and waitpid can collect it only once that thread is gone too
    code = ("import ctypes, ctypes.util, threading, time\n"
            "threading.Thread(target=time.sleep, args=(0.8,)).start()\n"
            "ctypes.CDLL(ctypes.util.find_library('c')).pthread_exit(None)\n")
    child = subprocess.Popen([sys.executable, "-c", code])
    proc = psutil.Process(child.pid)
    deadline = time.monotonic() + 5
    while proc.status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
        time.sleep(0.02)
    assert proc.status() == psutil.STATUS_ZOMBIE
    assert ended(proc) and proc.returncode is not None  # reaped, not left a zombie
    assert not psutil.pid_exists(child.pid) or psutil.Process(child.pid).create_time() != proc.create_time()
    child.returncode = proc.returncode  # reaped here: Popen must not wait on it again
