"""Boot the cached guest under qemu (software emulation, ``-accel tcg``), run one job in it, and
bring its results back through a writable 9p share.

The host shares one fresh folder (``/out`` in the guest) holding the job script and its payload
(testbed/vm/payload.py: the repository's code and tests, and pytest/pyroute2 from this
interpreter's site-packages); the guest writes its results there. The guest's Python is Debian's,
of the host's release, so its minor version must match this interpreter's (same bytecode).
qemu runs under a hard timeout and is ended by its PID whatever happens; the root disk is opened
with ``snapshot=on``, so the cached image is never written.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from testbed.processes import stop_popens
from testbed.vm.errors import VmError
from testbed.vm.image import Image
from testbed.vm.initramfs import OUT_DIR, OUT_TAG

KERNEL_CMDLINE = ("console=ttyS0 rdinit=/init panic=-1 quiet loglevel=4 random.trust_cpu=on "
                  "8250.nr_uarts=1 mitigations=off nokaslr")
KILL_WAIT_S = 5.0
# Loaded before the tests: a first netns/veth/qdisc would otherwise wait for them under emulation.
PRELOAD_MODULES = ("veth", "bridge", "sch_netem", "sch_tbf", "openvswitch", "tcp_diag")


@dataclass(frozen=True)
class BootResult:
    """What one boot brought back. ``out`` is the guest's output folder (removed unless kept)."""

    returncode: int | None  # the job's exit status; None if the guest never reported one
    wall_s: float
    userspace_s: float | None  # guest uptime when its init started (boot cost)
    console: str
    out: Path
    timed_out: bool


def qemu_argv(image: Image, out: Path, *, console: Path, smp: int, memory_mb: int, accel: str = "tcg") -> list[str]:
    """The qemu command line (pure: unit-tested); ``out`` is the folder shared with the guest.
    ``accel``: ``tcg`` (software emulation, works everywhere) or ``kvm`` (where /dev/kvm works:
    on these machines it is PVM and a stock guest kernel hangs under it)."""
    if accel not in ("tcg", "kvm"):
        raise ValueError(f"accel must be tcg or kvm, not {accel!r}")
    qemu = shutil.which("qemu-system-x86_64") or "qemu-system-x86_64"
    accel_opt = "tcg,thread=multi,tb-size=256" if accel == "tcg" else accel
    argv = [qemu, "-accel", accel_opt, "-cpu", "max", "-smp", str(smp), "-m", str(memory_mb),
            "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
            "-kernel", str(image.kernel), "-initrd", str(image.initrd), "-append", KERNEL_CMDLINE,
            "-drive", f"file={image.root},format=raw,if=virtio,snapshot=on,cache=unsafe",
            "-device", "virtio-rng-pci",
            "-chardev", f"file,id=con,path={console}", "-serial", "chardev:con",
            "-virtfs", f"local,path={out},mount_tag={OUT_TAG},security_model=none"]
    return argv


def check_python(image: Image) -> None:
    """The guest runs the host venv's packages with Debian's python3: same minor version, or the
    compiled bytecode (and any extension module) would not fit."""
    guest = image.manifest.get("guest_python", "")
    host = f"python{sys.version_info.major}.{sys.version_info.minor}"
    if guest != host:
        raise VmError(f"the guest's Python is {guest or '?'} but this venv's is {host}: run testbed from a venv "
                      "made with the host's Debian python3 (bash scripts/setup.sh does)")


def boot(image: Image, job: str, *, prepare=None, timeout_s: float = 600, smp: int | None = None,
         memory_mb: int = 1024, accel: str = "tcg") -> BootResult:
    """Boot ``image``, run the shell script ``job`` in it (as root), power off.
    ``prepare(out)`` may add files for the job first. The caller owns ``result.out`` (and
    removes it); on an error it is removed here."""
    check_python(image)
    out = Path(tempfile.mkdtemp(prefix="tb-vm-"))
    try:
        (out / "job.sh").write_text(job)
        if prepare is not None:
            prepare(out)
        console = out / "console.log"
        argv = qemu_argv(image, out, console=console, smp=smp or min(2, os.cpu_count() or 1), memory_mb=memory_mb,
                         accel=accel)
        t0 = time.monotonic()
        returncode, timed_out = _run_qemu(argv, out / "qemu.log", timeout_s)
        wall_s = time.monotonic() - t0
        text = console.read_text(errors="replace") if console.exists() else ""
        if returncode != 0 and not timed_out:
            qlog = (out / "qemu.log").read_text(errors="replace").strip()
            raise VmError(f"qemu exited with {returncode}: {qlog[-2000:]}")
        rc_file = out / "rc"
        rc = int(rc_file.read_text().strip()) if rc_file.exists() else None
        m = re.search(r"tb-guest: userspace up at ([0-9.]+) s", text)
        return BootResult(rc, wall_s, float(m.group(1)) if m else None, text, out, timed_out)
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)
        raise


def _run_qemu(argv: list[str], log: Path, timeout_s: float) -> tuple[int | None, bool]:
    """Run qemu to completion or ``timeout_s``; on timeout (or Ctrl-C) end it by its PID."""
    with open(log, "wb") as fh:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        return proc.wait(timeout=timeout_s), False
    except subprocess.TimeoutExpired:
        return None, True
    finally:
        stop_popens([proc], timeout_s=KILL_WAIT_S, kill_wait_s=KILL_WAIT_S)


def pytest_job(tests: list[str], marker: str, *, payload: str = "payload.tar") -> str:
    """The guest's job: unpack the payload into tmpfs, then pytest on ``tests`` (paths relative
    to the repository) with ``-m marker``. The exit status goes to ``/out/rc``, the report to
    ``/out/junit.xml``, measurements to ``/out/measurements.jsonl``, the output to the console
    and ``/out/pytest.log``."""
    env = {"PYTHONPATH": "/tmp/tb/repo:/tmp/tb/pylib", "PYTHONDONTWRITEBYTECODE": "1",
           "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "TESTBED_MEASUREMENTS": f"{OUT_DIR}/measurements.jsonl"}
    exports = "\n".join(f"export {k}={shlex.quote(v)}" for k, v in env.items())
    cmd = shlex.join(["python3", "-m", "pytest", "-p", "no:cacheprovider", "-m", marker, "-v", "-rs",
                      f"--junitxml={OUT_DIR}/junit.xml", *tests])
    return f"""set -u
{exports}
modprobe -a {" ".join(PRELOAD_MODULES)} || echo "tb-guest: modprobe failed"
mkdir -p /tmp/tb && tar -xf {OUT_DIR}/{payload} -C /tmp/tb || exit 1
cd /tmp/tb/repo
echo "tb-guest: payload unpacked at $(cut -d' ' -f1 /proc/uptime) s"
{{ {cmd}; echo $? > {OUT_DIR}/rc; }} 2>&1 | tee {OUT_DIR}/pytest.log
"""
