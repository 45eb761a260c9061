"""Relays forked from one host process (testbed.netem.relay.relayfork): they end up as *our* children
(reaped by us, exit codes known), each in its own namespace, and a relay that cannot start says why."""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path

import socket

import psutil
import pytest

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: network namespaces, veth and AF_PACKET sockets"),
]

from testbed.netem.nsexec import in_netns, terminate  # noqa: E402
from testbed.processes import ended  # noqa: E402
from testbed.netem.relay.relay import PathImpairment, relay_argv  # noqa: E402
from testbed.netem.relay.relayfork import RelaySpec, _is_subreaper, start_relays  # noqa: E402
from tests.integration.test_relay import ADDR_B, relayed_link  # noqa: E402


def _spec(link, tmp: Path, i: int, netns: str | None = None) -> RelaySpec:
    imp = PathImpairment(delay_ms=5.0)
    argv = relay_argv(link.if_ra, link.if_rb, imp, imp, seed=i, stats_path=str(tmp / f"s{i}.json"),
                      ready_file=str(tmp / f"r{i}"), netns=netns or link.ns_r)
    return RelaySpec(args=argv[3:], log_path=str(tmp / f"log{i}"))


def _wait_ready(paths: list[Path]) -> None:
    deadline = time.monotonic() + 20
    while not all(p.exists() for p in paths):
        assert time.monotonic() < deadline, [p for p in paths if not p.exists()]
        time.sleep(0.01)


def test_forked_relays_are_our_children_in_their_namespaces(tmp_path):
    with contextlib.ExitStack() as stack:
        links = [stack.enter_context(relayed_link(offloads_off=True)) for _ in range(3)]
        recorded: list[int] = []
        tag = str(tmp_path)
        pids = start_relays([_spec(lk, tmp_path, i) for i, lk in enumerate(links)], tag, on_pid=recorded.append)
        procs = [psutil.Process(pid) for pid in pids]
        try:
            assert recorded == pids and len(set(pids)) == 3
            assert not _is_subreaper()  # the flag was only held while the host ran
            _wait_ready([tmp_path / f"r{i}" for i in range(3)])
            for p, lk in zip(procs, links):
                assert p.ppid() == os.getpid()  # re-parented to us: we reap it
                assert tag in " ".join(p.cmdline())  # clean's ownership check can find the run
                assert os.stat(f"/proc/{p.pid}/ns/net").st_ino == os.stat(f"/var/run/netns/{lk.ns_r}").st_ino
                assert os.getsid(p.pid) == p.pid  # own session: a terminal's Ctrl-C does not reach it
            # traffic crosses one of them: a TCP handshake A -> B through the relay
            with in_netns(links[0].ns_b):
                srv = socket.socket()
                srv.bind((ADDR_B, 5333))
                srv.listen(1)
            with in_netns(links[0].ns_a):
                c = socket.create_connection((ADDR_B, 5333), timeout=10)
            c.close()
            srv.close()
        finally:
            rep = terminate(procs, timeout_s=5)
        assert sorted(rep.terminated) == sorted(pids) and not rep.killed
        assert all(rep.returncodes[pid] == 0 for pid in pids)  # our children: real exit codes
        assert not any(psutil.pid_exists(pid) for pid in pids)  # reaped, no zombies
        for i in range(3):
            stats = json.loads((tmp_path / f"s{i}.json").read_text())
            assert stats["impairments"]["a_to_b"]["delay_ms"] == 5.0


def test_a_relay_that_cannot_start_exits_with_its_reason_in_the_log(tmp_path):
    with relayed_link() as lk:
        pids = start_relays([_spec(lk, tmp_path, 0, netns="tb-nosuch-ns")], str(tmp_path))
        proc = psutil.Process(pids[0])
        deadline = time.monotonic() + 20
        while not ended(proc):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert proc.returncode == 1
        assert "cannot enter network namespace tb-nosuch-ns" in (tmp_path / "log0").read_text()
        assert not (tmp_path / "r0").exists()
