"""The sites' TCP congestion control: names checked against the kernel, the machine-wide allowed list
changed only where needed and given back when the last run that needed it is gone."""

from __future__ import annotations

import json

import pytest

from testbed.errors import SpecError
from testbed.netem import tcp_cc
from testbed.netem.owned import state
from testbed.netem.plan import LinkInput, plan_fabric


@pytest.fixture
def kernel(tmp_path, monkeypatch):
    """A stand-in /proc/sys/net/ipv4 (default bbr, allowed reno bbr) and state directory."""
    proc = tmp_path / "ipv4"
    proc.mkdir()
    (proc / "tcp_available_congestion_control").write_text("reno bbr cubic\n")
    (proc / "tcp_allowed_congestion_control").write_text("reno bbr\n")
    (proc / "tcp_congestion_control").write_text("bbr\n")
    monkeypatch.setattr(tcp_cc, "PROC_IPV4", proc)
    monkeypatch.setattr(state, "STATE_DIR", tmp_path / "state")
    return proc


def _live_run(run_id: str) -> None:
    state.add(run_id, purpose="net", namespaces=[f"tb-{run_id}-s-a"])


def test_names_are_checked_against_the_kernel(kernel):
    assert tcp_cc.problem("cubic") is None and tcp_cc.problem("host") is None
    assert "not available in this kernel (available: reno bbr cubic)" in tcp_cc.problem("vegas")
    assert "modprobe tcp_vegas" in tcp_cc.problem("vegas")
    assert "not a congestion control name" in tcp_cc.problem("Cubic; rm")
    with pytest.raises(SpecError) as e:
        tcp_cc.check("vegas", "emulation.tcp_congestion")
    assert e.value.problems[0][0] == "emulation.tcp_congestion"
    assert tcp_cc.effective("host") == "bbr" and tcp_cc.effective("cubic") == "cubic"


def test_the_allowed_list_is_given_back_when_the_last_run_that_needed_it_is_gone(kernel):
    allowed = kernel / "tcp_allowed_congestion_control"
    _live_run("aaa111")
    _live_run("bbb222")
    assert tcp_cc.acquire("aaa111", "cubic") is True
    assert allowed.read_text().split() == ["reno", "bbr", "cubic"]
    assert json.loads(tcp_cc.ledger_path().read_text()) == {"cubic": ["aaa111"]}
    assert tcp_cc.acquire("bbb222", "cubic") is False  # already allowed, for a run of ours: shared
    assert tcp_cc.release("aaa111") == []  # bbb222 still needs it
    assert "cubic" in allowed.read_text().split()
    assert tcp_cc.release("bbb222") == ["cubic"]
    assert allowed.read_text().split() == ["reno", "bbr"]
    assert not tcp_cc.ledger_path().exists()  # nothing left noted
    assert state.scan()[1] == []  # the ledger beside the runs' files is no stray


def test_names_the_machine_allowed_already_are_never_touched(kernel):
    allowed = kernel / "tcp_allowed_congestion_control"
    _live_run("ccc333")
    assert tcp_cc.acquire("ccc333", "reno") is False
    assert tcp_cc.acquire("ccc333", "host") is False
    assert not tcp_cc.ledger_path().exists()
    assert tcp_cc.release("ccc333") == []
    assert allowed.read_text().split() == ["reno", "bbr"]


def test_a_crashed_runs_note_is_resolved_once_its_state_file_is_gone(kernel):
    allowed = kernel / "tcp_allowed_congestion_control"
    _live_run("ddd444")
    tcp_cc.acquire("ddd444", "cubic")
    assert tcp_cc.release("someone-else") == []  # ddd444 still has its state file (not cleaned yet)
    state.remove("ddd444")
    assert tcp_cc.release(None) == ["cubic"]
    assert allowed.read_text().split() == ["reno", "bbr"]


def test_the_plan_carries_the_name_and_refuses_a_malformed_one():
    links = [LinkInput("a", "b", 100.0, 100.0, delay_ms=5.0)]
    assert plan_fabric("abc123", ["a", "b"], links, "relay").tcp_congestion == "cubic"
    assert plan_fabric("abc123", ["a", "b"], links, "relay", tcp_congestion="host").tcp_congestion == "host"
    with pytest.raises(ValueError, match="tcp_congestion"):
        plan_fabric("abc123", ["a", "b"], links, "relay", tcp_congestion="../x")


def test_net_up_takes_the_flag_then_the_scenario_then_the_default(kernel, tmp_path):
    from testbed.net.held import tcp_congestion_of

    topo = tmp_path / "t.yaml"
    topo.write_text("name: t\nsites: []\nlinks: []\n")
    scen = tmp_path / "s.yaml"
    scen.write_text("name: s\nemulation: {tcp_congestion: bbr}\n")
    bad = tmp_path / "b.yaml"
    bad.write_text("name: s\nemulation: {tcp_congestion: vegas}\n")
    assert tcp_congestion_of(topo, None) == "cubic"
    assert tcp_congestion_of(scen, None) == "bbr"
    assert tcp_congestion_of(scen, "reno") == "reno"
    with pytest.raises(SpecError) as e:
        tcp_congestion_of(bad, None)
    assert e.value.problems[0][0] == "emulation.tcp_congestion"
    with pytest.raises(SpecError) as e:
        tcp_congestion_of(topo, "vegas")
    assert e.value.problems[0][0] == "--tcp-congestion"


def test_the_scenario_field_refuses_a_malformed_name():
    from pydantic import ValidationError

    from testbed.spec.scenario import Emulation

    assert Emulation().tcp_congestion == "cubic"
    assert Emulation(tcp_congestion="host").tcp_congestion == "host"
    with pytest.raises(ValidationError):
        Emulation(tcp_congestion="cubic bbr")
