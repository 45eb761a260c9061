"""The local Vagrant box (testbed/vm/box.py) and how the Vagrantfile picks its box and libvirt driver.
The build itself needs root and the network; scripts/vagrant-check.sh runs it (test_vagrant_check)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from testbed.vm import box

# Vagrant.configure is stubbed: only the file's top-level choices are evaluated
STUB = 'module Vagrant; def self.configure(*); end; end; load ARGV[0]; puts BOX; puts DRIVER'


def _choice(root, tmp_path, boxes=(), **env) -> tuple[str, str]:
    ruby = shutil.which("ruby")
    if ruby is None:
        pytest.skip("ruby is not installed (it comes with vagrant: bash scripts/setup.sh as root)")
    home = tmp_path / "vagrant.d"
    for name in boxes:
        (home / "boxes" / name.replace("/", "-VAGRANTSLASH-")).mkdir(parents=True)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TESTBED_V")}
    done = subprocess.run([ruby, "-e", STUB, str(root / "Vagrantfile")], capture_output=True, text=True, timeout=60,
                          env={**clean, "VAGRANT_HOME": str(home), **env})
    assert done.returncode == 0, done.stderr
    chosen, driver = done.stdout.split()
    return chosen, driver


def test_public_box_unless_only_the_local_one_is_installed(root, tmp_path):
    assert _choice(root, tmp_path / "a")[0] == "debian/bookworm64"
    assert _choice(root, tmp_path / "b", boxes=["testbed/bookworm-local"])[0] == "testbed/bookworm-local"
    assert _choice(root, tmp_path / "c", boxes=["testbed/bookworm-local", "debian/bookworm64"])[0] == "debian/bookworm64"
    assert _choice(root, tmp_path / "d", TESTBED_VAGRANT_BOX="other/box")[0] == "other/box"


def test_driver_is_qemu_where_kvm_is_not_usable(root, tmp_path):
    usable = (os.access("/dev/kvm", os.R_OK | os.W_OK) and not os.path.isdir("/sys/module/kvm_pvm"))
    assert _choice(root, tmp_path / "a")[1] == ("kvm" if usable else "qemu")
    assert _choice(root, tmp_path / "b", TESTBED_VM_DRIVER="qemu")[1] == "qemu"


def test_box_key_names_its_inputs():
    k = box.box_key("bookworm", "http://deb.debian.org/debian")
    assert k == box.box_key("bookworm", "http://deb.debian.org/debian") and len(k) == 16
    assert k != box.box_key("trixie", "http://deb.debian.org/debian")
    assert k != box.box_key("bookworm", "http://mirror.example/debian")


def test_mounts_under_sees_only_that_tree(tmp_path):
    assert box.mounts_under(tmp_path) == []
    assert "/proc" in box.mounts_under(type(tmp_path)("/proc"))


def test_box_needs_what_vagrant_needs():
    for pkg in ("openssh-server", "sudo", "rsync", "linux-image-amd64", "systemd-sysv", "isc-dhcp-client"):
        assert pkg in box.BOX_PACKAGES
    assert "private_key_path" in box.BOX_VAGRANTFILE and "insert_key = false" in box.BOX_VAGRANTFILE
    assert "ssh-keygen -A" in box.FIRSTBOOT and "resize2fs /dev/vda" in box.FIRSTBOOT
