"""``testbed doctor`` as root on this machine: the kernel probes really run, agree with the kernel
config, and leave nothing behind (not even when a probe is cut short by its deadline)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

import testbed.cli
from testbed import doctor
from testbed.doctor import context, scratch
from testbed.doctor.context import ProbeContext, ProbeSpec, read_kconfig
from testbed.doctor.probes_host import cgroup_mounts
from testbed.doctor.report import render, summarize
from testbed.netem.owned.naming import new_run_id, run_of_ns
from testbed.registry import Registry

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="doctor's kernel probes need root (CI runs as root)"),
]


def _left_behind(run_id: str) -> list[str]:
    from pyroute2 import netns

    left = [n for n in netns.listnetns() if run_of_ns(n) == run_id]
    v1 = cgroup_mounts().get("v1_cpu")
    if v1 is not None and (v1 / scratch.cgroup_name(run_id)).exists():
        left.append(str(v1 / scratch.cgroup_name(run_id)))
    return left + [p.name for p in Path("/sys/class/net").iterdir() if p.name.startswith(f"tb{run_id}")]


@pytest.fixture(scope="module")
def probed():
    run_id = new_run_id()
    caps = doctor.capabilities(run_id=run_id)
    return run_id, caps


def test_namespaces_veth_and_shaping_are_available(probed):
    _, caps = probed
    for name in ("root", "netns", "veth", "qdisc_tbf", "qdisc_htb", "qdisc_tbf_change", "fair_queue", "af_packet", "linux_bridge"):
        assert caps[name].available, f"{name}: {caps[name].detail}"
        assert caps[name].probed
    assert caps["qdisc_tbf_change"].measured["rate_after_bps"] == 200_000_000


@pytest.mark.parametrize(("name", "option"), [("qdisc_netem", "CONFIG_NET_SCH_NETEM"), ("qdisc_fq", "CONFIG_NET_SCH_FQ")])
def test_missing_qdiscs_agree_with_the_kernel_config(probed, name, option):
    _, caps = probed
    cap, config = caps[name], read_kconfig().get(option)
    if config == "y":
        assert cap.available, cap.detail
    elif config == "n":
        assert not cap.available, cap.detail
        assert f"{option} is not set" in cap.detail
    text = render(caps, summarize(caps))
    assert (f"{name}: absent ->" in text) is (not cap.available)
    if name == "qdisc_netem" and not cap.available:
        assert "userspace delay relay" in text
        assert summarize(caps)["latency"] == ("relay" if caps["af_packet"].available else None)


def test_nothing_is_left_behind(probed):
    run_id, caps = probed
    assert _left_behind(run_id) == []
    assert doctor.has_netem() is caps["qdisc_netem"].available


def test_a_probe_cut_short_by_its_deadline_leaves_nothing(monkeypatch):
    """The deadline interrupts a probe holding a namespace, a veth pair and a qdisc: all go."""
    def stuck(ctx: ProbeContext):
        with scratch.scratch_veth(ctx.run_id, "slow") as v:
            v.ipr.tc("add", "tbf", v.index, rate="10mbit", burst=131072, latency="50ms")
            time.sleep(30)
        return True, "", {}

    spec = ProbeSpec("stuck", stuck, "yes", "no", needs_root=True, timeout_s=0.5)
    probes_with_stuck: Registry[ProbeSpec] = Registry("doctor probe")
    for name, known in context.PROBES.items():
        probes_with_stuck.add(name, known)
    probes_with_stuck.add(spec.name, spec)
    monkeypatch.setattr(context, "PROBES", probes_with_stuck)
    run_id = new_run_id()
    cap = doctor.capabilities(only=["stuck"], run_id=run_id)["stuck"]
    assert cap.detail == "probe timed out after 0.5 s"
    assert _left_behind(run_id) == []


_forks = []
os.register_at_fork(before=lambda: _forks.append(1))  # counts Python-level forks (subprocess's exec path: none)


def test_kernel_probes_do_not_fork():
    """A forked child inherits the caller's Python signal handlers and ``finally`` clauses (it could
    remove a namespace the parent still uses): the kernel probes make everything from threads."""
    before = len(_forks)
    caps = doctor.capabilities(only=[name for name, spec in doctor.all_specs().items() if spec.needs_root])
    assert all(c.probed for c in caps.values())
    assert len(_forks) == before


def test_cli_json_as_root(monkeypatch, capsys):
    monkeypatch.setattr(testbed.cli, "_COMMANDS", ("doctor",))
    assert testbed.cli.main(["doctor", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["summary"]["root"] is True
    assert out["summary"]["substrates"]["netns"]["usable"] is True
    assert out["summary"]["bandwidth_shaping"] == "tbf"
    assert _left_behind(out["summary"]["run_id"]) == []
