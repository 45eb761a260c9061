"""A live WAN for outside programs: ``testbed net set`` (in place, measured by iperf3 inside the
sites), ``testbed net up --replay`` (a degradation event at its time), and ``testbed.net.up`` with
a user's own torch.distributed all_reduce across it."""

from __future__ import annotations

import json
import math
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time

import pytest

from tests.integration.conftest import TWO_SITES_TOPOLOGY as TOPO
from tests.integration.conftest import our_namespaces
from tests.integration.conftest import testbed_cli as _tb
from tests.unit.net.test_net_live import REPLAY_SCENARIO

pytestmark = pytest.mark.root
INTERVAL_S = 0.25
IPERF_LINE = re.compile(r"\]\s+([\d.]+)-([\d.]+)\s+sec\s+.*?\s([\d.]+)\s+([KMG]?)bits/sec")
needs_iperf3 = pytest.mark.skipif(shutil.which("iperf3") is None, reason="iperf3 missing (scripts/setup.sh installs it)")


def _up(path, *extra) -> str:
    out = _tb("net", "up", str(path), *extra).stdout
    return re.search(r"network ([a-z0-9]{6}) up", out).group(1)


def _state(run: str) -> dict:
    from testbed.netem.owned import state

    return state.read(run)


class Iperf:
    """iperf3 from ``src`` to ``dst`` (the server sends: -R), 0.25 s receiver-side intervals, each
    stamped with the wall time its line arrived (the interval's end)."""

    def __init__(self, st: dict, src: str, dst: str, seconds: int, port: int = 5301):
        from testbed.netem.nsexec import spawn

        s_ns, d_ns = st["sites"][src]["ns"], st["sites"][dst]["ns"]
        addr = st["sites"][src]["addr"]
        self.server = spawn(s_ns, ["iperf3", "-s", "-1", "-B", addr, "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        self.client = spawn(d_ns, ["iperf3", "-c", addr, "-p", str(port), "-R", "-t", str(seconds), "-i",
                                   str(INTERVAL_S), "--forceflush", "-f", "m"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.samples: list[tuple[float, float]] = []  # (wall time at the interval's end, Mbit/s)
        self.text: list[str] = []
        self._th = threading.Thread(target=self._read, daemon=True)
        self._th.start()

    def _read(self) -> None:
        for line in self.client.stdout:
            now = time.time()
            self.text.append(line)
            m = IPERF_LINE.search(line)
            if m and "sender" not in line and "receiver" not in line:
                rate = float(m.group(3)) * {"": 1e-6, "K": 1e-3, "M": 1.0, "G": 1e3}[m.group(4)]
                self.samples.append((now, rate))

    def wait(self, timeout: float) -> int:
        rc = self.client.wait(timeout=timeout)
        self._th.join(timeout=5)
        self.server.wait(timeout=10)
        return rc

    def stop(self) -> None:
        from testbed.netem.nsexec import terminate

        terminate([self.client, self.server], timeout_s=3)
        self._th.join(timeout=5)
        self.client.stdout.close()

    def mean(self, t0: float, t1: float) -> float:
        """The receiver rate over the intervals that lie within [t0, t1] (wall clock): their median, so
        that one stall of this loaded machine (another process holding both cores) does not count
        as the link's rate; a wrong rate moves every interval."""
        xs = [r for t, r in self.samples if t - INTERVAL_S >= t0 - 0.02 and t <= t1 + 0.02]
        assert xs, f"no iperf3 interval within [{t0}, {t1}]"
        return statistics.median(xs)

    def step_time(self, hi: float, lo: float, after: float) -> float:
        """When the rate stepped from ``hi`` down to ``lo``: the first interval (after ``after``) below
        their midpoint for a second, placed within it by its mix of the two rates."""
        mid, hold = (hi + lo) / 2, round(1.0 / INTERVAL_S)
        for i, (t, r) in enumerate(self.samples):  # a lasting step, not a stall of a loaded machine
            if t - INTERVAL_S >= after and all(x < mid for _, x in self.samples[i:i + hold]):
                frac_hi = min(max((r - lo) / (hi - lo), 0.0), 1.0)
                return t - INTERVAL_S + frac_hi * INTERVAL_S
        raise AssertionError(f"the rate never fell below {(hi + lo) / 2} Mbit/s: {self.samples}")


@needs_iperf3
def test_net_set_changes_a_link_in_place_measured_by_iperf3(tmp_path):
    f = tmp_path / "two.yaml"
    f.write_text(TOPO)
    run = _up(f)
    try:
        ip = Iperf(_state(run), "left", "right", seconds=25)
        try:
            while len(ip.samples) < 12:  # 3 s at the built rate
                assert ip.client.poll() is None, "".join(ip.text)
                time.sleep(0.1)
            t_cli = time.time()
            out = _tb("net", "set", "left-right", "--run", run, "--bandwidth-mbit", "40", "--direction", "left->right")
            assert "left->right 40 Mbit/s" in out.stdout and "right->left 100 Mbit/s" in out.stdout
            t_set = next(lk for lk in _state(run)["links"] if lk["key"] == "left-right")["changed_unix"]
            assert t_cli <= t_set <= time.time()
            while not ip.samples or ip.samples[-1][0] < t_set + 3.2:
                assert ip.client.poll() is None, "".join(ip.text)
                time.sleep(0.1)
            before = ip.mean(ip.samples[0][0] + 1.0, t_cli)
            after = ip.mean(t_set + 1.0, t_set + 3.0)
            rc = ip.wait(timeout=60)
        finally:
            ip.stop()
        print(f"net set: before {before:.1f} Mbit/s, 1-3 s after the change {after:.1f} Mbit/s (asked 40)")
        print("samples after the change (s, Mbit/s):", [(round(t - t_set, 2), r) for t, r in ip.samples if t > t_set - 1])
        assert rc == 0, "".join(ip.text[-5:])  # one TCP flow throughout: never reset by the change
        assert before > 80.0
        assert abs(after - 40.0) <= 0.10 * 40.0
        if shutil.which("ping"):  # delay through the relay, changed live in one direction
            _tb("net", "set", "right-left", "--run", run, "--delay-ms", "40", "--direction", "left->right")
            st = _state(run)
            ping = _tb("net", "exec", "left", "--run", run, "--", "ping", "-c", "8", "-i", "0.2",
                       st["sites"]["right"]["addr"]).stdout
            rtt = statistics.median(float(t) for t in re.findall(r"time=([\d.]+) ms", ping))
            print(f"net set: RTT {rtt:.1f} ms after delay 40 ms one way (15 ms back)")
            assert abs(rtt - 55.0) <= 1.0 + 0.05 * 55.0
        status = json.loads(_tb("net", "status", "--json").stdout)
        lk = [s for s in status if s["run_id"] == run][0]["links"][0]
        assert (lk["rate_ab_mbit"], lk["rate_ba_mbit"], lk["delay_ab_ms"], lk["delay_ba_ms"]) == (40, 100, 40, 15)
        bad = _tb("net", "set", "left-right", "--run", run, "--bandwidth-mbit", "-3", check=False)
        assert bad.returncode == 2 and bad.stderr.startswith("error: --bandwidth-mbit")
    finally:
        _tb("net", "down", "--run", run)
    assert our_namespaces(run) == []


@needs_iperf3
def test_replay_applies_a_degradation_event_at_its_time(tmp_path):
    f = tmp_path / "replay.yaml"
    f.write_text(REPLAY_SCENARIO)  # 100 Mbit/s; -60 % from scenario 1800 s = 18 s wall (time_scale 100)
    run = _up(f, "--replay")
    try:
        st = _state(run)
        t0 = st["replay"]["t0_unix"]
        event_wall = t0 + 1800.0 / 100
        assert time.time() < event_wall - 3, "net up took too long to see the event"
        ip = Iperf(st, "left", "right", seconds=math.ceil(event_wall + 5 - time.time()))
        try:
            rc = ip.wait(timeout=60)
        finally:
            ip.stop()
        step = ip.step_time(100.0, 40.0, after=ip.samples[0][0] + 1.0)
        after = ip.mean(event_wall + 1.0, event_wall + 4.0)
        print(f"replay: the event at +{event_wall - t0:.1f} s took effect at +{step - t0:.2f} s "
              f"(off by {step - event_wall:+.2f} s); then {after:.1f} Mbit/s (trace: 40)")
        print("samples around the event (s after it, Mbit/s):",
              [(round(t - event_wall, 2), r) for t, r in ip.samples if abs(t - event_wall) < 3])
        assert rc == 0
        assert abs(step - event_wall) <= 1.0
        assert abs(after - 40.0) <= 0.10 * 40.0
        rp = _state(run)["replay"]
        assert rp["applied"] >= 2 and rp["last"]["rate_mbit"] == pytest.approx(40.0)
        lk = _state(run)["links"][0]
        assert lk["rate_ab_mbit"] == pytest.approx(40.0) and lk["rate_ba_mbit"] == pytest.approx(40.0)
    finally:
        down = _tb("net", "down", "--run", run)
    assert "down" in down.stdout and our_namespaces(run) == []


ALL_REDUCE = """
import sys
from datetime import timedelta

import torch
import torch.distributed as dist

rank, master, me, port = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
store = dist.TCPStore(master, port, 2, rank == 0, timeout=timedelta(seconds=120))
opts = dist.ProcessGroupGloo._Options()
opts._devices = [dist.ProcessGroupGloo.create_device(hostname=me)]  # the site's address on the WAN
opts._timeout = timedelta(seconds=120)
pg = dist.ProcessGroupGloo(store, rank, 2, opts)
t = torch.arange(4, dtype=torch.float32) * (rank + 1)
pg.allreduce([t]).wait()
print("all_reduce", t.tolist(), flush=True)
pg.barrier().wait()  # neither rank leaves (rank 0 holds the store) while the other still talks to it
del pg  # gloo's threads joined here, not torn down at interpreter exit (which can abort: std::terminate)
"""


def test_python_handle_runs_a_users_torch_distributed_all_reduce_across_the_wan(tmp_path):
    pytest.importorskip("torch")
    import testbed

    f = tmp_path / "two.yaml"
    f.write_text(TOPO)
    script = tmp_path / "all_reduce.py"
    script.write_text(ALL_REDUCE)
    with testbed.net.up(f) as wan:
        run = wan.run_id
        left, right = wan.sites["left"], wan.sites["right"]
        assert wan.status()["purpose"] == "net" and run in _tb("net", "status").stdout
        lk = wan.set("left-right", bandwidth_mbit=50, delay_ms=25, direction="both")
        assert (lk["rate_ab_mbit"], lk["delay_ba_ms"]) == (50, 25)
        assert wan.status()["links"][0]["rate_ba_mbit"] == 50
        r0 = wan.exec("left", [sys.executable, str(script), "0", left, left, "29511"], background=True,
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        r1 = wan.exec("right", [sys.executable, str(script), "1", left, right, "29511"], timeout=240)
        out0, err0 = r0.communicate(timeout=120)
        assert r1.returncode == 0 and r0.returncode == 0, (r1.stderr[-800:], err0[-800:])
        assert "all_reduce [0.0, 3.0, 6.0, 9.0]" in r1.stdout and "all_reduce [0.0, 3.0, 6.0, 9.0]" in out0
        ping = wan.exec("right", ["ping", "-c", "5", "-i", "0.2", left]) if shutil.which("ping") else None
        if ping is not None:
            rtt = statistics.median(float(t) for t in re.findall(r"time=([\d.]+) ms", ping.stdout))
            assert abs(rtt - 50.0) <= 1.0 + 0.05 * 50.0  # the live delay: 25 ms each way
    assert our_namespaces(run) == []
    from testbed.netem.owned import state

    assert state.read(run) is None


@pytest.mark.netem
def test_net_set_changes_netem_delay_in_place(tmp_path):
    """Where the kernel has netem (``testbed vm test`` runs this in a guest that has it): delay
    changed in one direction by ``tc change`` of the root netem, with a TCP connection open across
    the change (not reset), measured with ping."""
    from tests.integration.guest_support import netem_available

    if not netem_available():
        pytest.skip("this kernel has no sch_netem qdisc; `testbed vm test` runs this in a qemu guest that has")
    import socket

    import testbed
    from testbed.netem.nsexec import in_netns

    f = tmp_path / "two.yaml"
    f.write_text(TOPO)
    with testbed.net.up(f, impairment="netem") as wan:
        st = wan.status()
        left, right = wan.sites["left"], wan.sites["right"]

        def rtt() -> float:
            out = wan.exec("left", ["ping", "-c", "8", "-i", "0.2", right]).stdout
            return statistics.median(float(t) for t in re.findall(r"time=([\d.]+) ms", out)[1:])

        with in_netns(st["sites"]["right"]["ns"]):
            srv = socket.create_server((right, 5311))
        with in_netns(st["sites"]["left"]["ns"]):
            cl = socket.create_connection((right, 5311), timeout=10)
        conn, _ = srv.accept()
        before = rtt()
        wan.set("left-right", delay_ms=40, direction="left->right")
        after = rtt()
        cl.sendall(b"still here")  # the connection made before the change carries on
        assert conn.recv(64) == b"still here"
        for s in (cl, conn, srv):
            s.close()
    print(f"netem: RTT {before:.1f} ms -> {after:.1f} ms (one way 15 -> 40 ms)")
    assert abs((after - before) - 25.0) <= 1.0 + 0.05 * 25.0


def test_sites_use_the_chosen_tcp_congestion_control_and_the_machine_gets_its_list_back(tmp_path):
    """Every site's stack defaults to the network's congestion control (cubic unless chosen), whatever
    the machine's default; a name the machine-wide allowed list lacks is added while a network needs
    it (two at once share it) and taken off after the last; a name the kernel lacks is refused before
    anything is made."""
    import testbed
    from testbed.errors import SpecError
    from testbed.netem import tcp_cc

    f = tmp_path / "two.yaml"
    f.write_text(TOPO)
    before = tcp_cc.allowed()
    cat = ["cat", "/proc/sys/net/ipv4/tcp_congestion_control"]
    with testbed.net.up(f) as one, testbed.net.up(f, tcp_congestion="host") as two:
        assert {one.exec(s, cat).stdout.strip() for s in one.sites} == {"cubic"}
        assert {two.exec(s, cat).stdout.strip() for s in two.sites} == {tcp_cc.host_default()}
        assert one.status()["tcp_congestion"] == "cubic"
        with testbed.net.up(f) as three:
            assert three.exec("left", cat).stdout.strip() == "cubic"
            runs = {one.run_id, two.run_id, three.run_id}
        assert "cubic" in tcp_cc.allowed()  # `one` still needs it
    assert tcp_cc.allowed() == before
    assert all(our_namespaces(r) == [] for r in runs)
    with pytest.raises(SpecError, match="--tcp-congestion: 'nosuchcc' is not available in this kernel"):
        with testbed.net.up(f, tcp_congestion="nosuchcc"):
            pass
    r = _tb("net", "up", str(f), "--tcp-congestion", "nosuchcc", check=False)
    assert r.returncode == 2 and "--tcp-congestion: 'nosuchcc'" in r.stderr and "Traceback" not in r.stderr
    assert tcp_cc.allowed() == before
