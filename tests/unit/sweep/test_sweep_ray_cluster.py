"""``testbed sweep --ray HOST:PORT`` on a cluster started the way a user starts one: ``ray start --head``
plus a second node with ``ray start --address``, with Ray's token authentication on (the token in
~/.ray/auth_token, as any earlier ``ray.init()`` leaves it). The sweep finds the token as Ray's CLI
does, runs on both nodes and gives the same tables as a local run; a wrong address, a missing and a
wrong token each end the sweep with one line naming what to set. The cluster is private (its own
temp dir, HOME and ports) and only its own processes are stopped."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from testbed.cli import main
from testbed.sweep.ray_backend import RayUnavailable, import_ray
from tests.unit.sweep.ray_cluster_support import RayCluster, free_ports
from tests.unit.sweep_support import write_sweep

try:
    import_ray()
except RayUnavailable:  # pragma: no cover - ray is in the 'sweep' extra that setup.sh installs
    pytest.skip("ray is not installed (pip install -e '.[sweep]')", allow_module_level=True)

AUTH_VARS = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_ADDRESS")


@pytest.fixture(scope="module")
def cluster():
    with RayCluster() as c:
        c.generate_token()
        c.start_head(cpus=1)
        c.add_worker(cpus=1)
        yield c
    assert not c.processes(), "processes of the test's Ray cluster left behind"


@pytest.fixture
def as_user(cluster, monkeypatch):
    """This process as the user who started the cluster: their HOME (so their token), no RAY_AUTH_* set."""
    monkeypatch.setenv("HOME", str(cluster.home))
    for name in AUTH_VARS:
        monkeypatch.delenv(name, raising=False)
    return cluster


@pytest.mark.slow  # about a minute on 2 busy cores: a two-node Ray start and 24 trial runs
def test_sweep_on_two_ray_start_nodes_matches_local(as_user, tmp_path, capsys):
    path = write_sweep(tmp_path)
    local, through_ray = tmp_path / "local", tmp_path / "ray"
    assert main(["sweep", str(path), "--out", str(local), "--parallel", "2"]) == 0
    assert main(["sweep", str(path), "--out", str(through_ray), "--ray", as_user.address]) == 0
    assert f"12 trials: 0 reused, 12 run, 0 failed (ray:{as_user.address}" in capsys.readouterr().out
    for name in ("results.parquet", "results.csv", "table.csv", "table.md"):
        assert (through_ray / name).read_bytes() == (local / name).read_bytes(), name
    records = [json.loads(p.read_text()) for p in through_ray.glob("trials/*/seed-*/trial.json")]
    assert len(records) == 12 and all(r["status"] == "completed" for r in records)
    assert len({r["ray_node"] for r in records}) == 2, "the trials did not run on both nodes"
    assert "RAY_AUTH_MODE" not in os.environ  # the token mode was this sweep's only


@pytest.mark.slow
def test_missing_token_is_named_in_one_line(as_user, tmp_path, monkeypatch, capsys):
    path = write_sweep(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "a-user-without-a-token"))
    out = tmp_path / "out"
    assert main(["sweep", str(path), "--out", str(out), "--ray", as_user.address]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"error: --ray {as_user.address}: the cluster needs Ray's auth token and this machine has none")
    assert "RAY_AUTH_TOKEN" in err[-1] and "Traceback" not in "\n".join(err)
    assert not out.exists()


@pytest.mark.slow
def test_wrong_token_is_named(as_user, tmp_path, monkeypatch, capsys):
    path = write_sweep(tmp_path)
    monkeypatch.setenv("RAY_AUTH_TOKEN", "0" * 32)
    assert main(["sweep", str(path), "--out", str(tmp_path / "out"), "--ray", as_user.address]) == 1
    assert "rejected this machine's Ray auth token (from RAY_AUTH_TOKEN)" in capsys.readouterr().err


def test_nothing_at_the_address_fails_at_once(tmp_path, capsys):
    path = write_sweep(tmp_path)
    port, = free_ports(1)
    out = tmp_path / "out"
    assert main(["sweep", str(path), "--out", str(out), "--ray", f"127.0.0.1:{port}"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"error: --ray 127.0.0.1:{port}: nothing answers at 127.0.0.1:{port}")
    assert not out.exists()


def test_a_malformed_address_is_bad_input(tmp_path, capsys):
    path = write_sweep(tmp_path)
    assert main(["sweep", str(path), "--out", str(tmp_path / "out"), "--ray", "head-without-port"]) == 2
    assert "--ray: expected 'local', 'auto', HOST:PORT or ray://HOST:PORT (got 'head-without-port')" in capsys.readouterr().err


@pytest.mark.slow  # a second (one-node) Ray start and 12 short trials
def test_a_token_here_joins_a_cluster_without_auth(tmp_path, monkeypatch, capsys):
    """A machine with a token (any earlier ray.init() leaves one) joins a cluster started without
    auth: the token is sent and ignored."""
    path = write_sweep(tmp_path)
    with RayCluster() as open_cluster:   # no token in its HOME: `ray start --head` starts without auth
        open_cluster.start_head(cpus=2)
        user = RayCluster()
        try:
            user.generate_token()
            monkeypatch.setenv("HOME", str(user.home))
            for name in AUTH_VARS:
                monkeypatch.delenv(name, raising=False)
            assert main(["sweep", str(path), "--out", str(tmp_path / "out"), "--ray", open_cluster.address]) == 0
        finally:
            user.stop()
    assert "12 trials: 0 reused, 12 run, 0 failed" in capsys.readouterr().out
    assert not open_cluster.processes()
