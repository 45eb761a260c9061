"""The Vagrantfile (docs/how-to/vagrant.md): Vagrant accepts it, and it provisions what the
README's set-up does. CI checks it with ``vagrant validate`` (Debian's vagrant package, which
scripts/setup.sh installs as root); booting the VM itself needs a hypervisor CI does not have."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest


@pytest.mark.vm
def test_vagrant_validates_the_vagrantfile(root, tmp_path):
    vagrant = shutil.which("vagrant")
    if vagrant is None:
        pytest.skip("vagrant is not installed (bash scripts/setup.sh installs it as root)")
    shutil.copy(root / "Vagrantfile", tmp_path / "Vagrantfile")  # .vagrant/ goes there, not into the checkout
    env = {**os.environ, "VAGRANT_HOME": str(tmp_path / "vagrant.d"), "VAGRANT_CHECKPOINT_DISABLE": "1",
           "VAGRANT_NO_PLUGINS": "1"}
    # --ignore-provider: no libvirt or VirtualBox here; provider blocks are parsed, not checked
    done = subprocess.run([vagrant, "validate", "--ignore-provider"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "validated successfully" in done.stdout


def test_vagrantfile_provisions_like_the_readme(root):
    text = (root / "Vagrantfile").read_text()
    # the public box, or the local one built from Debian packages when only that one is installed
    assert re.search(r'PUBLIC_BOX = "(debian|ubuntu)/\w+"', text) and 'LOCAL_BOX = "testbed/bookworm-local"' in text
    assert "config.vm.box = BOX" in text
    assert "provider :libvirt" in text and "provider :virtualbox" in text
    for step in ("bash scripts/setup.sh --no-run", ".venv/bin/testbed doctor", "bash scripts/test.sh"):
        assert step in text
    reproduce = root / "scripts" / "reproduce.sh"
    assert os.access(reproduce, os.X_OK)
    assert "scripts/reference.sh" in reproduce.read_text()
    reference = (root / "scripts" / "reference.sh").read_text()
    assert "scenarios/paper-migration-5node-7day.yaml" in reference and "testbed report" in reference.replace("$TB", "testbed")
    assert "sudo bash /vagrant/scripts/reproduce.sh" in (root / "docs" / "how-to" / "vagrant.md").read_text()


def test_vagrant_check_rejects_bad_arguments_before_doing_anything(root):
    script = root / "scripts" / "vagrant-check.sh"
    for args, field in ((["--substrate", "sim;reboot"], "--substrate"), (["--frobnicate"], "--frobnicate")):
        done = subprocess.run(["bash", str(script), *args], capture_output=True, text=True, timeout=30)
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith("error: ") and field in done.stderr and len(done.stderr.splitlines()) == 1
        assert done.stdout == ""   # no step ran (the first prints its time)
