"""``testbed doctor`` without privileges: root probes say "needs root", the JSON schema is stable,
pynvml may be absent, deadlines hold, and mocked results give the right consequences."""

from __future__ import annotations

import dataclasses
import gzip
import json
import subprocess
import sys
import time
import types

import pytest

import testbed.cli
from testbed import doctor
from testbed.doctor import context, probes_host, scratch
from testbed.doctor.context import ProbeContext, ProbeSpec, read_kconfig
from testbed.doctor.report import render, to_json
from testbed.doctor.report import summarize as summarize_caps
from testbed.registry import Registry
from testbed.substrate.registry import doctor_checks


def summarize(caps, run_id=""):
    """What `testbed doctor` summarizes: a line per registered substrate and node runtime with a check."""
    return summarize_caps(caps, run_id, doctor_checks())

# The probe names are part of the public contract (substrates look them up): change = new schema.
NAMES = (
    "root", "netns", "veth", "qdisc_tbf", "qdisc_htb", "qdisc_netem", "qdisc_fq", "qdisc_clsact",
    "qdisc_ingress", "qdisc_tbf_change", "fair_queue", "af_packet", "mininet", "mnexec", "linux_bridge", "brctl", "ovs",
    "ovs_kernel_datapath", "docker_client", "docker_engine", "dockerd", "cgroup_v1_cpu", "cgroup_v2_cpu",
    "nvml", "torch", "qemu", "kvm", "tcp_congestion", "iperf3", "ethtool",
)
ROOT_PROBES = [name for name, spec in doctor.all_specs().items() if spec.needs_root]


def _forbid_kernel_resources(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("a probe made a kernel resource")

    for name in ("scratch_netns", "scratch_veth", "scratch_cgroup", "sweep"):
        monkeypatch.setattr(scratch, name, refuse)


def _stub(results: dict[str, bool]) -> Registry[ProbeSpec]:
    """Every real spec (names and consequence texts), with its probe replaced by a constant result."""
    def fake(spec: ProbeSpec) -> ProbeSpec:
        ok = results.get(spec.name, True)
        return dataclasses.replace(spec, fn=lambda ctx: (ok, f"stub {'yes' if ok else 'no'}", {}))

    stubs: Registry[ProbeSpec] = Registry("doctor probe")
    for name, spec in context.PROBES.items():
        stubs.add(name, fake(spec))
    return stubs


@pytest.fixture
def stubbed(monkeypatch):
    """Replace every probe by a stub; returns a function taking {name: available}."""
    monkeypatch.setattr("os.geteuid", lambda: 0)
    _forbid_kernel_resources(monkeypatch)
    monkeypatch.setattr(scratch, "sweep", lambda run_id, hierarchies=(): [])  # stubs make nothing

    def apply(results: dict[str, bool]) -> None:
        monkeypatch.setattr(context, "PROBES", _stub(results))

    return apply


def test_a_probe_is_one_entry_of_one_registry_and_a_plugin_probe_is_listed_last(monkeypatch):
    copy: Registry[ProbeSpec] = Registry("doctor probe")
    for name, spec in context.PROBES.items():
        copy.add(name, spec)
    monkeypatch.setattr(context, "PROBES", copy)

    @context.probe("lab_sensor", yes="the lab's sensor can be read", no="no lab sensor")
    def lab_sensor(ctx: ProbeContext):
        return True, "read 1 value", {"values": 1}

    assert tuple(doctor.all_specs()) == (*NAMES, "lab_sensor")
    cap = doctor.capabilities(only=["lab_sensor"])["lab_sensor"]
    assert (cap.available, cap.detail, cap.consequence) == (True, "read 1 value", "the lab's sensor can be read")
    with pytest.raises(ValueError, match="registered twice"):
        context.register_probe(ProbeSpec("root", lab_sensor, "y", "n"))


def test_probe_names_are_stable_and_unique():
    assert tuple(doctor.all_specs()) == NAMES
    assert set(ROOT_PROBES) == {"netns", "veth", "qdisc_tbf", "qdisc_htb", "qdisc_netem", "qdisc_fq", "qdisc_clsact",
                                "qdisc_ingress", "qdisc_tbf_change", "fair_queue", "af_packet", "linux_bridge", "cgroup_v1_cpu"}


def test_root_probes_say_needs_root_and_touch_nothing(monkeypatch):
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    monkeypatch.setattr("testbed.doctor.context.read_kconfig", lambda: {"CONFIG_NET_SCH_NETEM": "n"})
    _forbid_kernel_resources(monkeypatch)
    caps = doctor.capabilities(only=ROOT_PROBES + ["root"])
    assert caps["root"].available is False and caps["root"].detail == "running as uid 1000"
    for name in ROOT_PROBES:
        cap = caps[name]
        assert cap.available is False and cap.probed is False
        assert cap.detail.startswith("needs root (running as uid 1000)"), cap.detail
        assert cap.consequence.startswith("unknown until probed as root; if absent: ")
    assert "CONFIG_NET_SCH_NETEM is not set" in caps["qdisc_netem"].detail  # the kernel config still informs
    assert doctor.has_netem() is False


def test_need_root_probes_false_skips_them_even_as_root(monkeypatch):
    monkeypatch.setattr("os.geteuid", lambda: 0)
    _forbid_kernel_resources(monkeypatch)
    caps = doctor.capabilities(need_root_probes=False, only=ROOT_PROBES)
    assert all(not c.probed and c.detail.startswith("not probed (need_root_probes=False)") for c in caps.values())


def test_unknown_probe_name_is_an_error():
    with pytest.raises(KeyError, match="no_such_probe"):
        doctor.capabilities(only=["no_such_probe"])


def test_json_schema_is_stable(stubbed, monkeypatch, capsys):
    stubbed({"qdisc_netem": False})
    monkeypatch.setattr(testbed.cli, "_COMMANDS", ("doctor",))
    assert testbed.cli.main(["doctor", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"schema_version", "capabilities", "summary"} and out["schema_version"] == 1
    assert [c["name"] for c in out["capabilities"]] == list(NAMES)
    for c in out["capabilities"]:
        assert set(c) == {"name", "available", "detail", "consequence", "measured"}
        assert isinstance(c["available"], bool) and isinstance(c["measured"], dict) and c["consequence"]
    s = out["summary"]
    assert set(s) == {"root", "kernel", "run_id", "substrates", "bandwidth_shaping", "latency", "cpu_throttle",
                      "gpus", "netem_guest", "missing", "not_probed"}
    assert set(s["substrates"]) == {"sim", "netns", "mininet", "docker"}
    assert all(set(v) == {"usable", "why"} for v in s["substrates"].values())
    assert s["missing"] == ["qdisc_netem"] and s["not_probed"] == [] and len(s["run_id"]) == 6


def test_human_output_has_table_meanings_and_substrates(stubbed, monkeypatch, capsys):
    stubbed({})
    monkeypatch.setattr(testbed.cli, "_COMMANDS", ("doctor",))
    assert testbed.cli.main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "capability" in out and "What this means:" in out and "Substrates:" in out
    assert "everything probed is available" in out
    assert any(line.split()[:2] == ["qdisc_netem", "yes"] for line in out.splitlines())


def test_no_netem_means_the_delay_relay(stubbed):
    stubbed({"qdisc_netem": False, "qdisc_fq": False, "ovs_kernel_datapath": False})
    caps = doctor.capabilities()
    summary = summarize(caps)
    assert summary["latency"] == "relay" and summary["bandwidth_shaping"] == "tbf"
    text = render(caps, summary)
    assert ("qdisc_netem: absent -> latency/jitter/loss use the userspace delay relay (testbed/netem/relay/relay.py); "
            "Mininet's `delay=` would be silently dropped, so the mininet substrate routes delay through the "
            "relay or refuses") in text
    assert "ovs_kernel_datapath: absent -> OVS only with its userspace datapath (slow, ~1.2 Gbit/s" in text
    assert summary["substrates"]["netns"] == {"usable": True, "why": "bandwidth: tbf; latency/jitter/loss: relay"}


def test_no_netem_and_no_relay_means_no_latency(stubbed):
    stubbed({"qdisc_netem": False, "af_packet": False})
    caps = doctor.capabilities()
    assert summarize(caps)["latency"] is None
    assert "no delay relay: without netem, links get bandwidth shaping but no emulated latency" in render(
        caps, summarize(caps))


def test_substrates_follow_their_needs(stubbed):
    stubbed({"qdisc_tbf": False, "mininet": False, "docker_engine": False, "dockerd": False, "cgroup_v1_cpu": False})
    s = summarize(doctor.capabilities())
    assert s["bandwidth_shaping"] == "htb" and s["substrates"]["netns"]["usable"]
    assert s["substrates"]["mininet"] == {"usable": False, "why": "missing mininet"}
    assert s["substrates"]["docker"] == {"usable": False, "why": "missing docker_engine"}
    assert s["cpu_throttle"] == "cgroup_v2"
    assert s["substrates"]["sim"]["usable"]


def test_a_probe_past_its_deadline_is_reported(monkeypatch):
    slow = ProbeSpec("slow", lambda ctx: (time.sleep(5), (True, "", {}))[1], "yes", "no", timeout_s=0.2)
    t0 = time.monotonic()
    cap = doctor.run_probe(slow, ProbeContext(run_id="abc123", is_root=False))
    assert time.monotonic() - t0 < 2
    assert cap.available is False and cap.detail == "probe timed out after 0.2 s" and cap.measured["timed_out"]
    assert cap.consequence == "no"


def test_machine_errors_are_reported_bugs_are_raised():
    def broken_machine(ctx):
        raise PermissionError(1, "Operation not permitted")

    def bug(ctx):
        raise TypeError("a bug")

    cap = doctor.run_probe(ProbeSpec("x", broken_machine, "yes", "no"), ProbeContext("abc123", False))
    assert cap.available is False and cap.detail.startswith("probe failed: PermissionError")
    with pytest.raises(TypeError):
        doctor.run_probe(ProbeSpec("x", bug, "yes", "no"), ProbeContext("abc123", False))


# -- single probes with their inputs faked ---------------------------------------------------------

CTX = ProbeContext(run_id="abc123", is_root=False)


def test_pynvml_absent(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    ok, detail, measured = probes_host.probe_nvml(CTX)
    assert not ok and "pip install nvidia-ml-py" in detail and measured == {"installed": False}


def _fake_pynvml(init_error: type[Exception] | None = None, names=()) -> types.ModuleType:
    m = types.ModuleType("pynvml")
    m.NVMLError = type("NVMLError", (Exception,), {})
    m.NVMLError_LibraryNotFound = type("NVMLError_LibraryNotFound", (m.NVMLError,), {})
    m.shutdowns = 0

    def init():
        if init_error is not None:
            raise getattr(m, init_error.__name__)("NVML Shared Library Not Found")

    def shutdown():
        m.shutdowns += 1

    m.nvmlInit, m.nvmlShutdown = init, shutdown
    m.nvmlDeviceGetCount = lambda: len(names)
    m.nvmlDeviceGetHandleByIndex = lambda i: i
    m.nvmlDeviceGetName = lambda h: names[h].encode()  # older bindings return bytes
    m.nvmlSystemGetDriverVersion = lambda: "550.54"
    return m


def test_nvml_library_not_found(monkeypatch):
    class NVMLError_LibraryNotFound(Exception):  # noqa: N801 (NVML's name)
        pass

    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml(NVMLError_LibraryNotFound))
    ok, detail, measured = probes_host.probe_nvml(CTX)
    assert not ok and "NVMLError_LibraryNotFound" in detail and measured["error"] == "NVMLError_LibraryNotFound"


def test_nvml_with_gpus(monkeypatch):
    fake = _fake_pynvml(names=("NVIDIA H200", "NVIDIA H200"))
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    ok, detail, measured = probes_host.probe_nvml(CTX)
    assert ok and measured["device_count"] == 2 and measured["names"] == ["NVIDIA H200"] * 2
    assert fake.shutdowns == 1


def test_docker_engine_absent_or_silent(monkeypatch):
    monkeypatch.setattr(probes_host, "which", lambda cmd: None)
    assert probes_host.probe_docker_engine(CTX)[:2] == (False, "no docker client to ask")
    monkeypatch.setattr(probes_host, "which", lambda cmd: "/usr/bin/docker")

    def hang(argv, timeout_s):
        raise subprocess.TimeoutExpired(argv, timeout_s)

    monkeypatch.setattr(probes_host, "_run", hang)
    assert probes_host.probe_docker_engine(CTX)[1] == "`docker info` did not answer within 3 s"
    answer = subprocess.CompletedProcess([], 0, stdout='"28.2.2"\n', stderr="")
    monkeypatch.setattr(probes_host, "_run", lambda argv, timeout_s: answer)
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    assert probes_host.probe_docker_engine(CTX) == (True, "engine 28.2.2 answers at unix:///var/run/docker.sock",
                                                    {"server_version": "28.2.2", "host": "unix:///var/run/docker.sock"})


def test_torch_absent(monkeypatch):
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    ok, detail, _ = probes_host.probe_torch(CTX)
    assert not ok and detail.startswith("not installed")


def test_cgroup_mounts_and_kconfig_parsing(tmp_path):
    mounts = tmp_path / "mounts"
    mounts.write_text("cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,relatime,cpu,cpuacct 0 0\n"
                      "cgroup /sys/fs/cgroup/cpuset cgroup rw,relatime,cpuset 0 0\n"
                      "cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0\n")
    found = probes_host.cgroup_mounts(mounts)
    assert {k: str(v) for k, v in found.items()} == {"v1_cpu": "/sys/fs/cgroup/cpu,cpuacct", "v2": "/sys/fs/cgroup/unified"}
    config = tmp_path / "config.gz"
    config.write_bytes(gzip.compress(b"CONFIG_NET_SCH_TBF=y\n# CONFIG_NET_SCH_NETEM is not set\nCONFIG_X=m\n"))
    assert read_kconfig(config) == {"CONFIG_NET_SCH_TBF": "y", "CONFIG_NET_SCH_NETEM": "n", "CONFIG_X": "m"}
    assert read_kconfig(tmp_path / "missing.gz") == {}


def test_capability_json_round_trip():
    cap = doctor.Capability("x", True, "d", "c", {"probed": True, "n": 1})
    caps = {"x": cap}
    data = to_json(caps, summarize(caps))
    assert json.loads(json.dumps(data))["capabilities"] == [{"name": "x", "available": True, "detail": "d",
                                                             "consequence": "c", "measured": {"probed": True, "n": 1}}]
