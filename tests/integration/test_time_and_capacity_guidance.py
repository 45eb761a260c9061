"""As a user sees it on a real fabric: the wall-time estimate before an emulation starts, and
`testbed net status` warning about a link configured above what this machine can carry."""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from testbed.substrate.emulated.host_load import HostLoad
from tests.conftest import PACE_CACHE_ENV
from tests.integration.conftest import our_namespaces, two_sites_topology

pytestmark = pytest.mark.root
TB = [sys.executable, "-m", "testbed"]
QUICKSTART = Path(__file__).resolve().parents[2] / "scenarios" / "quickstart.yaml"

FAST_TOPO = two_sites_topology(bandwidth_gbps=10, latency_ms=5)


def test_a_first_emulation_says_how_long_it_will_take_within_a_factor_1_5(tmp_path):
    """A fresh machine (an empty pace cache of its own: other tests' emulations record theirs in the
    session's): the estimate comes from the model shipped with the code, and the run's wall time is
    within a factor 1.5 of it."""
    out = tmp_path / "r"
    env = {**os.environ, PACE_CACHE_ENV: str(tmp_path / "fresh-pace.json")}
    load, ours0, t0 = HostLoad().start(), _children_cpu_s(), time.perf_counter()
    r = subprocess.run([*TB, "run", str(QUICKSTART), "--substrate", "netns", "--set", "duration_h=12",
                        "--set", "emulation.nodes=agents", "--set", "policies=[static, energy_only]",
                        "--out", str(out)], capture_output=True, text=True, timeout=600, env=env)
    wall_s = time.perf_counter() - t0
    sample = load.stop()  # the run left before stop, so its CPU shows as other's there: take it back out
    others_cores = max(0.0, sample.other_cores + sample.steal_cores - (_children_cpu_s() - ours0) / sample.wall_s)
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    est = [ln for ln in lines if ln.startswith("estimated wall time: about ")]
    assert len(est) == 1 and "emulation.time_scale 120" in est[0] and "the default shipped" in est[0], lines
    assert not [ln for ln in lines if ln.startswith("warning: this emulation")]  # short at time_scale 120
    estimate_s = _seconds(est[0].removeprefix("estimated wall time: about ").split(" (")[0])
    # the estimate is for this machine as it is when quiet: other work's CPU during the run (the suite
    # beside a regeneration, say) stretches the run by up to cores / (cores left to it), not more
    cores = sample.n_cpus
    stretch = cores / max(cores - others_cores, 0.5)
    assert wall_s / (1.5 * stretch) <= estimate_s <= wall_s * 1.5, (estimate_s, wall_s, others_cores)
    assert (out / "manifest.json").is_file()


def _children_cpu_s() -> float:
    """CPU seconds of this test's finished child processes (the run and what it waited for)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _seconds(text: str) -> float:
    """``7.3 min`` / ``35 s`` / ``1.2 h`` (testbed.progress.fmt_duration) in seconds."""
    value, unit = text.split()
    return float(value) * {"s": 1.0, "min": 60.0, "h": 3600.0}[unit]


def test_net_status_warns_about_a_link_above_the_machine(tmp_path):
    f = tmp_path / "fast.yaml"
    f.write_text(FAST_TOPO)
    up = subprocess.run([*TB, "net", "up", str(f)], capture_output=True, text=True, timeout=120, check=True)
    run = re.search(r"network ([a-z0-9]{6}) up", up.stdout).group(1)
    try:
        st = subprocess.run([*TB, "net", "status", "--bench", str(tmp_path / "none.json")], capture_output=True,
                            text=True, timeout=60, check=True).stdout
        block = st.split(f"{run} (")[1].split("\n\n")[0]
        assert re.search(r"link left-right\s+10000/10000 Mbit/s .*\(machine: ~\d+ Mbit/s\)", block), block
        assert "warning: left-right: configured above what this machine can carry" in block, block
    finally:
        subprocess.run([*TB, "net", "down", "--run", run], capture_output=True, text=True, timeout=120)
    assert our_namespaces(run) == []
