"""``scripts/vagrant-check.sh`` end to end: the local Debian box built and added, ``vagrant up``
provisioning with the README's set-up, the quick start and a test subset inside the VM, their
results back through the shared folder, the VM destroyed. Under software emulation (no usable KVM)
this takes longer than CI allows (docs/measured/benchmarks.md, "The Vagrant VM, end to end": measured times), so it runs only when
asked: ``TESTBED_VAGRANT_CHECK=1 pytest -m vagrant tests/integration/test_vagrant_check.py``."""

from __future__ import annotations

import os
import subprocess

import pytest

pytestmark = [pytest.mark.vagrant, pytest.mark.root, pytest.mark.slow]


def test_vagrant_check_script_boots_provisions_and_destroys(root, tmp_path):
    if os.environ.get("TESTBED_VAGRANT_CHECK") != "1":
        pytest.skip("boots a VM (53 min here under software emulation): set TESTBED_VAGRANT_CHECK=1 to run it")
    keep = tmp_path / "results"
    done = subprocess.run(["bash", str(root / "scripts" / "vagrant-check.sh"), "--keep-results", str(keep)],
                          capture_output=True, text=True, timeout=4 * 3600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert (keep / "quickstart" / "manifest.json").is_file()
    assert (keep / "junit.xml").is_file()
    times = (keep / "times.txt").read_text()
    for step in ("up", "provision", "quickstart", "tests", "destroy", "total"):
        assert step in times
    listed = subprocess.run(["virsh", "-c", "qemu:///system", "list", "--all", "--name"], capture_output=True, text=True)
    assert "testbed_default" not in listed.stdout.split()  # the VM (vagrant-libvirt names it after the copy of HEAD): destroyed
