"""Host probes: container engine, CPU quota cgroups, GPUs/NVML, torch, qemu/KVM, tools.

Same contract as :mod:`testbed.doctor.probes`. Probes that start a process pass it a timeout;
nothing heavy (torch) is imported into the calling process.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

from testbed.power.throttle.cgroups import cgroup_mounts  # noqa: F401 (doctor/__init__ uses it from here)
from testbed.doctor import scratch
from testbed.doctor.context import ProbeContext, ProbeSpec, Result, probe, register_probe, tool_probe, which

DOCKER_TIMEOUT_S = 3.0


def _run(argv: list[str], timeout_s: float) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


# -- Docker --------------------------------------------------------------------------------------

register_probe(ProbeSpec("docker_client", tool_probe("docker"), "the docker CLI can drive an engine",
                         "no docker CLI: the docker node kind is unavailable"))


@probe("docker_engine", timeout_s=DOCKER_TIMEOUT_S + 2, yes="training nodes can run in containers (docker node kind)",
       no="no running Docker engine: container nodes need one (dockerd can be started by hand with "
          "--bridge=none --iptables=false), or sites run their processes directly in namespaces")
def probe_docker_engine(ctx: ProbeContext) -> Result:
    docker = which("docker")
    if docker is None:
        return False, "no docker client to ask", {}
    try:
        done = _run([docker, "info", "--format", "{{json .ServerVersion}}"], DOCKER_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return False, f"`docker info` did not answer within {DOCKER_TIMEOUT_S:g} s", {}
    if done.returncode != 0:
        return False, f"`docker info`: {_first_line(done.stderr) or f'exit {done.returncode}'}", {}
    version = json.loads(done.stdout or "null")
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    return True, f"engine {version} answers at {host}", {"server_version": version, "host": host}


register_probe(ProbeSpec(
    "dockerd", tool_probe("dockerd"),
    "an engine can be started by hand (dockerd --data-root D --exec-root E -H unix://S --bridge=none "
    "--iptables=false --ip-forward=false --ip-masq=false)",
    "no dockerd binary: install Debian's docker.io to run container nodes"))


# -- CPU quota cgroups ---------------------------------------------------------------------------

def _v1_hint(ctx: ProbeContext) -> str:
    point = cgroup_mounts().get("v1_cpu")
    return f"cpu controller mounted at {point}" if point else "no cgroup v1 cpu hierarchy mounted"


@probe("cgroup_v1_cpu", needs_root=True, hint=_v1_hint,
       yes="emulated power caps throttle CPU with cgroup v1 cpu.cfs_quota_us (a real throttle)",
       no="no cgroup v1 CPU quota: emulated power caps use cgroup v2 cpu.max if present, else a user-space duty-cycle throttle")
def probe_cgroup_v1_cpu(ctx: ProbeContext) -> Result:
    point = cgroup_mounts().get("v1_cpu")
    if point is None:
        return False, "no cgroup v1 hierarchy with the cpu controller is mounted", {}
    with scratch.scratch_cgroup(point, ctx.run_id) as cg:
        (cg / "cpu.cfs_period_us").write_text("100000")
        (cg / "cpu.cfs_quota_us").write_text("50000")
        quota = int((cg / "cpu.cfs_quota_us").read_text())
    ok = quota == 50000
    return ok, f"{point}: set and read back a 50% quota on a scratch cgroup", {"mount": str(point), "quota_us": quota}


@probe("cgroup_v2_cpu", yes="emulated power caps can throttle CPU with cgroup v2 cpu.max",
       no="cgroup v2 has no cpu controller: CPU throttling uses cgroup v1 if present")
def probe_cgroup_v2_cpu(ctx: ProbeContext) -> Result:
    point = cgroup_mounts().get("v2")
    if point is None:
        return False, "no cgroup2 mount", {}
    controllers = (point / "cgroup.controllers").read_text().split()
    ok = "cpu" in controllers
    return ok, f"cgroup2 at {point}, controllers: {' '.join(controllers) or 'none'}", {
        "mount": str(point), "controllers": controllers}


# -- GPUs and frameworks -------------------------------------------------------------------------

@probe("nvml", yes="GPU power caps are set and measured through NVML",
       no="no NVML GPUs: power caps use the emulated backend (cgroup CPU throttle / model)")
def probe_nvml(ctx: ProbeContext) -> Result:
    try:
        with warnings.catch_warnings():  # the legacy `pynvml` wrapper warns on import
            warnings.simplefilter("ignore")
            import pynvml
    except ImportError:
        return False, "pynvml not installed (pip install nvidia-ml-py)", {"installed": False}
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as e:
        return False, f"nvmlInit failed: {type(e).__name__} ({e})", {"installed": True, "error": type(e).__name__}
    try:
        count = pynvml.nvmlDeviceGetCount()
        names = [_text(pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i))) for i in range(count)]
        driver = _text(pynvml.nvmlSystemGetDriverVersion())
    finally:
        pynvml.nvmlShutdown()
    return count > 0, f"{count} GPU(s): {', '.join(names) or 'none'}; driver {driver}", {
        "installed": True, "device_count": count, "names": names, "driver": driver}


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


_TORCH_SNIPPET = "import json, torch; print(json.dumps([torch.__version__, torch.cuda.is_available()]))"


@probe("torch", timeout_s=60, yes="training nodes run real PyTorch jobs",
       no="no torch: training nodes cannot run real jobs (pip install torch); the sim substrate is unaffected")
def probe_torch(ctx: ProbeContext) -> Result:
    if importlib.util.find_spec("torch") is None:
        return False, f"not installed for {sys.executable}", {"installed": False}
    done = _run([sys.executable, "-c", _TORCH_SNIPPET], 55)
    if done.returncode != 0:
        return False, f"import failed: {_first_line(done.stderr.splitlines()[-1] if done.stderr else '')}", {
            "installed": True}
    version, cuda = json.loads(done.stdout.strip().splitlines()[-1])
    return True, f"torch {version}, CUDA {'available' if cuda else 'not available'}", {
        "installed": True, "version": version, "cuda": cuda}


# -- VMs and tools -------------------------------------------------------------------------------

@probe("qemu", yes="a netem/OVS-capable Debian guest can be booted for the tests this kernel cannot run",
       no="no qemu: tests needing netem, the OVS kernel datapath or Docker skip here")
def probe_qemu(ctx: ProbeContext) -> Result:
    path = which("qemu-system-x86_64")
    if path is None:
        return False, "qemu-system-x86_64 not found", {}
    done = _run([path, "--version"], 5)
    return True, f"{path}: {_first_line(done.stdout)}", {"path": path}


@probe("kvm", yes="qemu guests can use KVM acceleration",
       no="boot guests with `-accel tcg` (software emulation, ~2.5 min) under a timeout")
def probe_kvm(ctx: ProbeContext) -> Result:
    dev = Path("/dev/kvm")
    present = dev.exists() and os.access(dev, os.R_OK | os.W_OK)
    pvm = Path("/sys/module/kvm_pvm").is_dir()
    facts = {"dev_kvm": present, "pvm": pvm}
    if not present:
        return False, "/dev/kvm absent or not accessible", facts
    if pvm:
        return False, "/dev/kvm is PVM (kvm_pvm loaded): a stock guest kernel hangs under it", facts
    return True, "/dev/kvm accessible", facts


@probe("tcp_congestion", yes="the sites' TCP runs the congestion control a scenario names (emulation.tcp_congestion)",
       no="set emulation.tcp_congestion (or net up --tcp-congestion) to one this kernel has, or host")
def probe_tcp_congestion(ctx: ProbeContext) -> Result:
    from testbed.netem import tcp_cc

    have, allowed, host = tcp_cc.available(), tcp_cc.allowed(), tcp_cc.host_default()
    facts = {"available": have, "allowed": allowed, "host_default": host, "sites_default": tcp_cc.DEFAULT}
    where = (f"this machine's default {host}; available: {' '.join(have)}; a namespace may default to: "
             f"{' '.join(allowed)}")
    if tcp_cc.problem(tcp_cc.DEFAULT):
        return False, f"the sites' default {tcp_cc.DEFAULT} is not available ({where})", facts
    added = "" if tcp_cc.DEFAULT in allowed else f" (testbed adds {tcp_cc.DEFAULT} there while a network needs it)"
    return True, f"sites default to {tcp_cc.DEFAULT}; {where}{added}", facts


register_probe(ProbeSpec("iperf3", tool_probe("iperf3"), "link goodput can be cross-checked with iperf3",
                         "no iperf3 cross-checks of link goodput (the testbed's own transfers still measure it)"))
register_probe(ProbeSpec("ethtool", tool_probe("ethtool"), "the ethtool command Mininet expects is present",
                         "Mininet setups expect the ethtool command (install ethtool); the testbed itself switches "
                         "offloads through pyroute2.ethtool and does not need it"))
