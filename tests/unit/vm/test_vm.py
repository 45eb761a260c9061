"""The qemu guest's pure parts without root or qemu: cpio archives, module dependency order, the
image key, the qemu command line, the guest's job, its payload, and reading its report back."""

from __future__ import annotations

import io
import stat
import sys
import tarfile
from pathlib import Path

import pytest

import testbed.cli
from testbed.vm import cpio, guest, image, kmod, payload
from testbed.vm.errors import VmError
from testbed.vm.report import Case, GuestReport, parse_junit, parse_measurements


def _read_cpio(blob: bytes) -> list[tuple[str, int, bytes, tuple[int, int]]]:
    """A newc reader for the test: (name, mode, data, rdev) per member, trailer excluded."""
    out, pos = [], 0
    while True:
        head = blob[pos:pos + 110]
        assert head[:6] == b"070701"
        f = [int(head[6 + 8 * i:14 + 8 * i], 16) for i in range(13)]
        mode, size, rdev, namesize = f[1], f[6], (f[9], f[10]), f[11]
        name = blob[pos + 110:pos + 110 + namesize - 1].decode()
        pos += 110 + namesize
        pos += -pos % 4
        data = blob[pos:pos + size]
        pos += size
        pos += -pos % 4
        if name == "TRAILER!!!":
            return out
        out.append((name, mode, data, rdev))


def test_cpio_roundtrip_and_alignment():
    entries = [cpio.Entry.dir("bin"), cpio.Entry.file("bin/busybox", b"\x7fELF" + b"x" * 5, 0o755),
               cpio.Entry.symlink("bin/sh", "busybox"), cpio.Entry.chardev("console", 5, 1),
               cpio.Entry.file("init", b"#!/bin/sh\n", 0o755)]
    buf = io.BytesIO()
    n = cpio.write(buf, entries)
    blob = buf.getvalue()
    assert n == len(blob) and n % 512 == 0
    got = _read_cpio(blob)
    assert [g[0] for g in got] == ["bin", "bin/busybox", "bin/sh", "console", "init"]
    assert stat.S_ISDIR(got[0][1]) and stat.S_ISLNK(got[2][1]) and got[2][2] == b"busybox"
    assert stat.S_ISCHR(got[3][1]) and got[3][3] == (5, 1)
    assert got[1][2] == b"\x7fELF" + b"x" * 5 and stat.S_IMODE(got[1][1]) == 0o755


def test_cpio_refuses_absolute_paths():
    with pytest.raises(ValueError):
        cpio.write(io.BytesIO(), [cpio.Entry.file("/init", b"")])


def _fake_modules(tmp_path: Path, deps: dict[str, str]) -> Path:
    root = tmp_path / "lib" / "modules" / "6.1.0-test"
    for name, dep in deps.items():
        path = root / "kernel" / f"{name.replace('_', '-')}.ko"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"\x7fELF\0license=GPL\0depends=" + dep.encode() + b"\0vermagic=6.1\0")
    (root / "modules.builtin").write_text("kernel/crypto/crc32c_builtin.ko\n")
    return root


def test_module_load_order_puts_dependencies_first(tmp_path):
    root = _fake_modules(tmp_path, {"ext4": "jbd2,mbcache,crc32c_builtin", "jbd2": "", "mbcache": "",
                                    "virtio_blk": "virtio_ring,virtio", "virtio": "virtio_ring",
                                    "virtio_ring": ""})
    avail = kmod.index(root)
    assert avail["virtio_blk"].name == "virtio-blk.ko"  # '-' and '_' are the same module name
    order = kmod.load_order(["virtio-blk", "ext4"], avail, kmod.builtin(root))
    assert order == ["virtio_ring", "virtio", "virtio_blk", "jbd2", "mbcache", "ext4"]
    with pytest.raises(KeyError, match="sch_netem"):
        kmod.load_order(["sch_netem"], avail, set())


def test_compressed_modules_are_read_decompressed(tmp_path):
    import lzma

    root = _fake_modules(tmp_path, {"veth": ""})
    xz = root / "kernel" / "sch-netem.ko.xz"
    xz.write_bytes(lzma.compress(b"\x7fELF\0depends=veth\0"))
    avail = kmod.index(root)
    assert kmod.load_order(["sch_netem"], avail) == ["veth", "sch_netem"]
    assert kmod.read(xz).startswith(b"\x7fELF")


def test_module_dependency_cycle_is_an_error(tmp_path):
    root = _fake_modules(tmp_path, {"a": "b", "b": "a"})
    with pytest.raises(ValueError, match="cycle"):
        kmod.load_order(["a"], kmod.index(root))


def _inputs(**kw) -> image.GuestInputs:
    base = {"release": "bookworm", "mirror": "http://deb.debian.org/debian",
            "kernel_package": "linux-image-6.1.0-57-amd64", "kernel_version": "6.1.192-3",
            "busybox_version": "1:1.35.0-4"}
    return image.GuestInputs(**{**base, **kw})


def test_image_key_follows_every_input():
    key = _inputs().key()
    assert key == _inputs().key() and len(key) == 16
    assert _inputs(kernel_version="6.1.193-1").key() != key
    assert _inputs(packages=("python3",)).key() != key
    assert _inputs(mirror="http://example.org/debian").key() != key


def test_host_release_is_debian_only(tmp_path):
    f = tmp_path / "os-release"
    f.write_text('ID=debian\nVERSION_CODENAME=bookworm\n')
    assert image.host_release(f) == "bookworm"
    f.write_text('ID=ubuntu\nVERSION_CODENAME=noble\n')
    with pytest.raises(VmError, match="Vagrantfile"):
        image.host_release(f)


def _image(tmp_path: Path, python: str | None = None) -> image.Image:
    py = python or f"python{sys.version_info.major}.{sys.version_info.minor}"
    return image.Image(tmp_path, {"guest_python": py, "kernel_release": "6.1.0-57-amd64"})


def test_qemu_argv_is_software_emulation_with_a_throwaway_disk(tmp_path):
    argv = guest.qemu_argv(_image(tmp_path), tmp_path / "out", console=tmp_path / "c.log", smp=2, memory_mb=1024)
    joined = " ".join(argv)
    assert argv[argv.index("-accel") + 1].startswith("tcg")
    assert "snapshot=on" in joined and "-no-reboot" in argv and "-nodefaults" in argv
    assert f"path={tmp_path / 'out'},mount_tag=out" in joined
    assert "console=ttyS0" in argv[argv.index("-append") + 1]


def test_guest_python_must_match(tmp_path):
    guest.check_python(_image(tmp_path))
    with pytest.raises(VmError, match="python3.9"):
        guest.check_python(_image(tmp_path, "python3.9"))


def test_pytest_job_reports_through_the_share():
    job = guest.pytest_job(["tests/integration/test_netem.py"], "netem or ovs")
    assert "-m 'netem or ovs'" in job and "tests/integration/test_netem.py" in job
    assert "--junitxml=/out/junit.xml" in job and "> /out/rc" in job
    assert "tar -xf /out/payload.tar" in job and "TESTBED_MEASUREMENTS=/out/measurements.jsonl" in job


def test_payload_holds_the_repo_and_the_guests_python_packages(tmp_path, root):
    dists = {d.metadata["Name"].lower() for d in payload.distributions()}
    assert {"pytest", "pluggy", "iniconfig", "packaging", "pyroute2"} <= dists
    assert "numpy" in dists  # the transfer service of the contention rows (tests/integration/test_netem.py)
    assert {"psutil", "pyyaml", "pydantic"} <= dists
    info = payload.write(tmp_path / "p.tar", root)
    with tarfile.open(tmp_path / "p.tar") as tar:
        names = set(tar.getnames())
    assert {"repo/pyproject.toml", "repo/testbed/netem/fabric.py", "repo/tests/integration/test_netem.py",
            "pylib/pyroute2/__init__.py", "pylib/_pytest/main.py"} <= names
    assert info["distributions"]["pyroute2"] and info["bytes"] > 0


JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="0" failures="1"
skipped="1" tests="4"><testcase classname="tests.integration.test_netem" name="test_netem_loss" time="1.5"/>
<testcase classname="tests.integration.test_netem" name="test_netem_delay[10.0]" time="2.0">
<failure message="assert 25.0 &lt;= 22.0">trace</failure></testcase>
<testcase classname="tests.integration.test_ovs" name="test_ovs_kernel_datapath_forwards" time="0.1">
<skipped type="pytest.skip" message="Open vSwitch is not installed">skip</skipped></testcase>
<testcase classname="tests.integration.test_x.TestY" name="test_z" time="0"/></testsuite></testsuites>"""


def test_junit_is_read_back_per_case():
    cases = parse_junit(JUNIT)
    assert [c.nodeid for c in cases] == [
        "tests/integration/test_netem.py::test_netem_loss", "tests/integration/test_netem.py::test_netem_delay[10.0]",
        "tests/integration/test_ovs.py::test_ovs_kernel_datapath_forwards",
        "tests/integration/test_x.py::TestY::test_z"]
    assert [c.outcome for c in cases] == ["passed", "failed", "skipped", "passed"]
    assert cases[1].message == "assert 25.0 <= 22.0" and cases[0].duration_s == 1.5


def test_a_skip_in_the_guest_is_not_ok():
    passed = Case("t.py::a", "passed")
    assert GuestReport(0, (passed,)).ok
    assert not GuestReport(0, (passed, Case("t.py::b", "skipped", "no netem"))).ok
    assert not GuestReport(0, ()).ok  # nothing ran
    assert not GuestReport(1, (passed,)).ok
    assert "1 passed, 1 skipped" in GuestReport(0, (passed, Case("t.py::b", "skipped"))).summary()
    assert parse_measurements('{"test": "loss", "measured_pct": 9.6}\n\n') == ({"test": "loss", "measured_pct": 9.6},)


def test_cli_vm_test_exits_1_when_the_guest_skipped(monkeypatch, capsys, tmp_path):
    import testbed.vm.run as run

    report = GuestReport(0, (Case("tests/integration/test_netem.py::test_netem_loss", "skipped", "no netem"),),
                         output="1 skipped", timing_s={"build": 0.0, "boot_to_userspace": 6.0, "guest_wall": 40.0,
                                                       "total": 42.0}, image={"key": "k"})
    monkeypatch.setattr(run, "run_guest_tests", lambda **kw: report)
    assert testbed.cli.main(["vm", "test", "--json", str(tmp_path / "r.json")]) == 1
    err = capsys.readouterr().err
    assert "skipped: tests/integration/test_netem.py::test_netem_loss: no netem" in err
    assert '"ok": false' in (tmp_path / "r.json").read_text()


def test_apt_mirror_follows_the_hosts_sources(tmp_path):
    (tmp_path / "sources.list.d").mkdir()
    assert image.apt_mirror("bookworm", tmp_path) == image.DEFAULT_MIRROR
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.local/debian/\nSuites: bookworm bookworm-updates\nComponents: main\n\n"
        "Types: deb\nURIs: http://security.local/debian-security\nSuites: bookworm-security\n")
    assert image.apt_mirror("bookworm", tmp_path) == "http://mirror.local/debian"
    (tmp_path / "sources.list").write_text("# old style\ndeb [arch=amd64] http://old.local/debian trixie main\n")
    assert image.apt_mirror("trixie", tmp_path) == "http://old.local/debian"


def test_qemu_accelerator_is_tcg_or_kvm(tmp_path):
    argv = guest.qemu_argv(_image(tmp_path), tmp_path, console=tmp_path / "c", smp=1, memory_mb=512, accel="kvm")
    assert argv[argv.index("-accel") + 1] == "kvm"
    with pytest.raises(ValueError):
        guest.qemu_argv(_image(tmp_path), tmp_path, console=tmp_path / "c", smp=1, memory_mb=512, accel="hvf")
