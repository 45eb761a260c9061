"""scripts/reference.sh refuses, before touching anything, to regenerate without the emulated runs
unless asked to (--sim-only): it replaces results/reference/ as a whole, so a run without root would
otherwise drop the committed emulated runs."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def _copy(tmp_path: Path) -> Path:
    """The script in a stand-in checkout: a stub testbed (never run) and a marker results/reference."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "reference.sh", tmp_path / "scripts" / "reference.sh")
    stub = tmp_path / ".venv" / "bin" / "testbed"
    stub.parent.mkdir(parents=True)
    stub.write_text("#!/bin/sh\necho stub-ran >> \"$(dirname \"$0\")/../../stub.log\"\nexit 1\n")
    stub.chmod(0o755)
    (tmp_path / "results" / "reference").mkdir(parents=True)
    (tmp_path / "results" / "reference" / "keep.txt").write_text("committed\n")
    fake = tmp_path / "fakebin"
    fake.mkdir()
    (fake / "id").write_text("#!/bin/sh\necho 1000\n")  # not root
    (fake / "id").chmod(0o755)
    return fake


def test_without_root_it_refuses_and_touches_nothing(tmp_path: Path) -> None:
    fake = _copy(tmp_path)
    r = subprocess.run(["bash", str(tmp_path / "scripts" / "reference.sh")], capture_output=True, text=True,
                       env={"PATH": f"{fake}:/usr/bin:/bin"}, timeout=60)
    assert r.returncode == 2, r.stderr
    assert "need root" in r.stderr and "--sim-only" in r.stderr
    assert (tmp_path / "results" / "reference" / "keep.txt").read_text() == "committed\n"
    assert not (tmp_path / "results" / "reference-work").exists()
    assert not (tmp_path / "stub.log").exists()  # refused before running anything


def test_sim_only_without_root_goes_past_the_refusal(tmp_path: Path) -> None:
    """--sim-only is the explicit way to regenerate without emulation: the script goes on (here it then
    stops at its clean-tree check, since the stand-in is no git checkout)."""
    fake = _copy(tmp_path)
    r = subprocess.run(["bash", str(tmp_path / "scripts" / "reference.sh"), "--sim-only"], capture_output=True,
                       text=True, env={"PATH": f"{fake}:/usr/bin:/bin"}, timeout=60)
    assert "need root" not in r.stderr
    assert r.returncode != 0
    assert (tmp_path / "results" / "reference" / "keep.txt").read_text() == "committed\n"
