"""Your own container per site, end to end: the example's image is built from its Dockerfile by the
run's private engine (offline: the Dockerfile only COPYs), `testbed run --substrate netns` runs the
example's program in it at site a, migrates it to site b, where it resumes in b's container; the
program reports what only that image has (a file made unique for this test, its library, its own
python3). Then: nothing of the run is left, and an image the agent cannot run (a root file system
without a C library) is refused with one line, exit 2, nothing left."""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import shutil
import tarfile
import time

import pandas as pd
import pytest
import yaml

from testbed.cli import main
from tests.conftest import ROOT
from tests.integration.test_substrate_matrix import _leftovers

_SBIN_PATH = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
pytestmark = [
    pytest.mark.root,
    pytest.mark.docker,
    pytest.mark.skipif(shutil.which("dockerd", path=_SBIN_PATH) is None
                       or shutil.which("debootstrap", path=_SBIN_PATH) is None,
                       reason="the docker runtime needs Debian's docker.io and debootstrap (scripts/setup.sh installs them)"),
]
pytest.importorskip("torch", reason="node agents need torch")
EXAMPLE = ROOT / "examples" / "containers"


def _no_containers_in_the_data_root() -> bool:
    """The engine's kept data-root holds no container (checked while no engine holds its lock)."""
    from testbed.substrate.emulated.containers import DOCKER_DATA_ROOT

    fd = os.open(f"{DOCKER_DATA_ROOT}.lock", os.O_RDONLY | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        pytest.skip("another engine holds the image cache now")
    try:
        return not any((DOCKER_DATA_ROOT / "containers").glob("*"))
    finally:
        os.close(fd)


def test_user_program_runs_in_the_users_image_and_a_bad_image_is_refused(tmp_path, capsys, monkeypatch):
    import testbed.runner as runner

    run_ids: list[str] = []
    real = runner.new_run_id
    monkeypatch.setattr(runner, "new_run_id", lambda: run_ids.append(real()) or run_ids[-1])
    ex = tmp_path / "ex"
    shutil.copytree(EXAMPLE, ex)
    marker = f"built for this test {secrets.token_hex(6)}"
    (ex / "image" / "motd").write_text(marker + "\n")  # a new context: a new key, a real build
    d = yaml.safe_load((ex / "user_image.yaml").read_text())
    d["emulation"]["image"]["tag"] = "testbed-test-user-image"
    report = ex / "report.jsonl"  # in the program's folder, mounted in the containers
    d["workloads"]["programs"]["trainer"]["env"] = {"EXAMPLE_REPORT": str(report)}
    (ex / "s.yaml").write_text(yaml.safe_dump(d))

    t0 = time.perf_counter()
    out = tmp_path / "r"
    assert main(["run", str(ex / "s.yaml"), "--substrate", "netns", "--out", str(out), "--no-progress"]) == 0
    t_run = time.perf_counter() - t0
    sub = json.loads((out / "manifest.json").read_text())["substrate"]
    assert _leftovers(sub["run_id"]) == []
    assert _no_containers_in_the_data_root()
    images = sub["containers"]["images"]
    assert images["a"]["id"].startswith("sha256:") and images["a"]["id"] == images["b"]["id"]
    assert images["a"]["source"] == "built" and images["a"]["tag"].startswith("testbed-test-user-image:")
    assert images["a"]["from"] == f"dockerfile {ex / 'image' / 'Dockerfile'}"
    m = pd.read_parquet(out / "energy_only" / "migrations.parquet")
    assert len(m) == 1 and m["status"].iloc[0] == "completed", m["detail"].tolist()
    # the program started at a and resumed at b, each time in the user's image
    starts = [json.loads(line) for line in report.read_text().splitlines()]
    assert [(s["host"], s["resumed"]) for s in starts] == [("a", False), ("b", True)]
    for s in starts:
        assert (s["motd"], s["lib"], s["python"]) == (marker, "image_lib 1.0", "/usr/bin/python3")

    # an image the agent cannot run: refused before the run, one line naming the field, nothing left
    bad = ex / "bad.tar"
    (ex / "hostname").write_text("no C library here\n")
    with tarfile.open(bad, "w") as tf:
        tf.add(ex / "hostname", arcname="etc/hostname")
    d["emulation"]["image"] = {"tar": "bad.tar"}
    (ex / "bad.yaml").write_text(yaml.safe_dump(d))
    capsys.readouterr()
    t1 = time.perf_counter()
    out2 = tmp_path / "r2"
    assert main(["run", str(ex / "bad.yaml"), "--substrate", "netns", "--out", str(out2), "--no-progress"]) == 2
    t_refusal = time.perf_counter() - t1
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error:")]
    assert len(err) == 1 and "emulation.image: tar " in err[0] and "cannot run the node agent" in err[0], err
    assert not out2.exists()
    assert _leftovers(run_ids[-1]) == []
    assert _no_containers_in_the_data_root()
    print(f"\nrun with a fresh build {t_run:.1f} s (build {images['a']['make_s']} s); refusal {t_refusal:.1f} s")
