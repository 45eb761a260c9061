"""A live run this machine cannot do is refused before anything is built, in one line; a runtime
that does not apply to the kind of nodes is a spec error."""

from __future__ import annotations

import pytest

from testbed.cli import main


def test_ballast_with_docker_runtime_is_a_spec_error(capsys, tmp_path):
    out = tmp_path / "r"
    rc = main(["run", "scenarios/quickstart.yaml", "--substrate", "netns", "--out", str(out), "--no-progress",
               "--set", "emulation.nodes=ballast", "--set", "emulation.runtime=docker"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "runtime 'docker' does not apply to nodes 'ballast'" in err[0]
    assert not out.exists()


def test_missing_mininet_tools_refuse_the_run_up_front(monkeypatch, capsys, tmp_path):
    pytest.importorskip("mininet.net")
    from testbed.substrate.mininet import switches

    monkeypatch.setattr(switches, "_which", lambda tool: None if tool == "mnexec" else "/bin/true")
    out = tmp_path / "r"
    rc = main(["run", "scenarios/quickstart.yaml", "--substrate", "mininet", "--out", str(out), "--no-progress"])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error:")]
    assert rc == 1 and err == ["error: --substrate mininet cannot run quickstart here: mininet's mnexec is not on PATH "
                               "(scripts/setup.sh installs Mininet's tools)"]
    assert not out.exists()


def test_docker_runtime_without_its_tools_refuses(monkeypatch):
    from testbed.runtime import dockerd
    from testbed.runtime.errors import RuntimeUnavailable
    from testbed.substrate.emulated.containers import docker_unavailable

    def no_tools():
        raise RuntimeUnavailable("no `dockerd` found: install Debian's docker.io")

    monkeypatch.setattr(dockerd, "find_tools", no_tools)
    assert docker_unavailable() == "runtime 'docker': no `dockerd` found: install Debian's docker.io"


def test_ovs_switch_refused_with_its_reason(monkeypatch, tmp_path):
    pytest.importorskip("mininet.net")
    from testbed.substrate.mininet import ovs, switches

    monkeypatch.setattr(switches, "_which", lambda tool: "/bin/true")
    monkeypatch.setattr(ovs, "which", lambda tool: None if tool == "ovs-vsctl" else "/bin/true")
    assert switches.switch_unavailable("ovs").startswith("switch 'ovs': no Open vSwitch here")
    assert switches.switch_unavailable("lxbr") is None
    assert "choose one of lxbr, ovs" in switches.switch_unavailable("p4")
    # no system ovsdb answering and no daemons to start a private one: said, with what is missing
    monkeypatch.setattr(ovs, "which", lambda tool: None if tool == "ovs-vswitchd" else "/bin/true")
    monkeypatch.setattr(ovs, "system_ovs_answers", lambda: False)
    monkeypatch.setattr(ovs, "kernel_datapath", lambda: True)
    why = switches.switch_unavailable("ovs")
    assert why.startswith("switch 'ovs': no ovsdb answers and a private one cannot be started (ovs-vswitchd")
    # neither datapath: no kernel module, no tun device for the userspace one
    monkeypatch.setattr(ovs, "kernel_datapath", lambda: False)
    monkeypatch.setattr(ovs, "TUN", tmp_path / "no-tun")
    assert "no datapath" in switches.switch_unavailable("ovs")


def test_mininet_substrate_switch_comes_from_the_scenario(monkeypatch, capsys, tmp_path):
    pytest.importorskip("mininet.net")
    from testbed.spec.load import load_scenario
    from testbed.substrate.mininet import switches

    out = tmp_path / "r"
    rc = main(["run", "scenarios/quickstart.yaml", "--substrate", "mininet", "--set", "emulation.switch=p4",
               "--out", str(out), "--no-progress"])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error:") or "emulation.switch" in ln]
    assert rc == 2 and err and "emulation.switch" in "\n".join(err) and not out.exists()  # refused as a field
    monkeypatch.setattr(switches, "switch_unavailable", lambda s: None if s == "lxbr" else f"no {s} here")
    rc = main(["run", "scenarios/quickstart.yaml", "--substrate", "mininet", "--set", "emulation.switch=ovs",
               "--out", str(out), "--no-progress"])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error:")]
    assert rc == 1 and len(err) == 1 and "emulation.switch ovs: no ovs here" in err[0] and not out.exists()
    assert switches.substrate_switch(load_scenario("scenarios/quickstart.yaml").scenario) == "lxbr"



def test_federated_study_runs_the_same_check_up_front(monkeypatch, capsys, tmp_path):
    """The federated study asks the substrate's own check (the migration study's) before it builds
    anything; without real transfers nothing live is made, so nothing is asked."""
    import yaml

    from testbed.inputs import build_inputs
    from testbed.spec.load import load_scenario
    from testbed.studies import study_for
    from testbed.substrate.emulated import preflight
    from tests.unit.federated_support import tiny

    asked = []

    def unavailable(scenario):
        asked.append(scenario.name)
        return "pyroute2 is not installed (stand-in reason)"

    monkeypatch.setattr(preflight, "live_unavailable", unavailable)
    f = tmp_path / "fl.yaml"
    f.write_text(yaml.safe_dump(tiny(emulated_transfers=True)))
    out = tmp_path / "r"
    rc = main(["run", str(f), "--substrate", "netns", "--out", str(out), "--no-progress", "--no-plots"])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error:")]
    assert asked == ["fl-tiny"] and rc == 1 and not out.exists()
    assert err == ["error: --substrate netns cannot run fl-tiny here: pyroute2 is not installed (stand-in reason)"]
    f.write_text(yaml.safe_dump(tiny(emulated_transfers=False)))
    loaded = load_scenario(f)
    study_for(loaded, substrate="netns").check(build_inputs(loaded.scenario, None))  # modelled: not refused
    assert asked == ["fl-tiny"]
