"""Host contention during a migration (testbed.substrate.emulated.host_load)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from testbed.substrate.emulated import host_load
from testbed.substrate.emulated.host_load import HostLoad, LoadSample

SPIN = "import time\nend = time.monotonic() + 30\nwhile time.monotonic() < end: pass\n"


def test_contended_is_other_processes_over_half_a_core_or_steal():
    assert host_load.OTHER_CORES_MAX == 0.5 and host_load.STEAL_CORES_MAX == 0.1
    quiet = LoadSample(wall_s=2.0, host_cores=1.3, own_cores=1.0, steal_cores=0.0, n_cpus=2)
    assert quiet.other_cores == pytest.approx(0.3) and not quiet.contended
    busy = LoadSample(wall_s=2.0, host_cores=1.7, own_cores=1.0, steal_cores=0.0, n_cpus=2)
    assert busy.contended
    stolen = LoadSample(wall_s=2.0, host_cores=1.0, own_cores=1.0, steal_cores=0.2, n_cpus=2)
    assert stolen.other_cores == 0.0 and stolen.contended
    # our own accounting can exceed the host's by sampling jitter: never a negative load
    assert LoadSample(1.0, 0.9, 1.0, 0.0, 2).other_cores == 0.0


def _spin(detach: bool) -> tuple[int, subprocess.Popen | None]:
    if detach:  # a grandchild reparented away from us: not one of our processes
        out = subprocess.run(["sh", "-c", f'"{sys.executable}" -c "$0" >/dev/null 2>&1 & echo $!', SPIN],
                             capture_output=True, text=True, check=True)
        return int(out.stdout.strip()), None
    child = subprocess.Popen([sys.executable, "-c", SPIN])
    return child.pid, child


def _sample_while_spinning(detach: bool) -> tuple[LoadSample, float]:
    """The sample, and the spinner's own CPU (cores) over the same window, as the kernel counts it
    (the machine may be shared: the spinner gets what it gets)."""
    pid, child = _spin(detach)
    try:
        proc = psutil.Process(pid)
        time.sleep(0.3)  # the spinner is running
        c0 = sum(proc.cpu_times()[:2])
        h = HostLoad().start()
        time.sleep(1.5)
        sample = h.stop()
        return sample, (sum(proc.cpu_times()[:2]) - c0) / sample.wall_s
    finally:
        os.kill(pid, signal.SIGKILL)
        if child is not None:
            child.wait()


def _sample_with_a_busy_spinner(detach: bool, tries: int = 5) -> tuple[LoadSample, float]:
    """A sample taken while the spinner got at least 0.2 of a core (on a shared machine under a busy
    test suite it may get less in one window: that window says nothing of the accounting, try again)."""
    for _ in range(tries):
        s, spinner = _sample_while_spinning(detach)
        if spinner > 0.2:
            break
    return s, spinner


def test_a_child_of_ours_is_our_own_load():
    s, spinner = _sample_with_a_busy_spinner(detach=False)
    assert spinner > 0.2, spinner
    assert s.own_cores >= spinner - 0.1, (s, spinner)  # counted as ours
    assert s.host_cores >= s.own_cores - 0.2


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs a second core for the other process")
def test_a_process_not_ours_is_contention():
    s, spinner = _sample_with_a_busy_spinner(detach=True)
    assert spinner > 0.2, spinner
    assert s.other_cores >= spinner - 0.15, (s, spinner)  # counted as someone else's
    assert s.own_cores < spinner / 2, (s, spinner)
    assert s.contended == (s.other_cores > 0.5 or s.steal_cores > 0.1)
