"""Container nodes end to end: a private dockerd started by the test, the base image built (or
imported from its cache) without a registry, and a container whose TCP server lives in a site's
namespace and is reached from another namespace over a veth. Then: nothing of the run is left."""

from __future__ import annotations

import os
import shutil
import socket
import sys
import time
from contextlib import contextmanager

import pytest

from testbed.netem.owned.naming import if_name, new_run_id, ns_name
from testbed.netem.nsexec import in_netns, ipr_in, ns_path
from testbed.netem.owned.state import pid_alive
from testbed.runtime import (BaseImageRecipe, ContainerNode, DockerEngine, RuntimeUnavailable, ensure_base_image,
                             host_python)
from testbed.runtime.dockerd import cgroup_roots, find_tools
from testbed.runtime.image import CACHE_DIR
from tests.integration.conftest import our_namespaces

_SBIN_PATH = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
pytestmark = [
    pytest.mark.root,
    pytest.mark.docker,
    pytest.mark.skipif(shutil.which("dockerd", path=_SBIN_PATH) is None,
                       reason="no dockerd: install Debian's docker.io (scripts/setup.sh does it as root)"),
]

SITE_ADDR, PEER_ADDR, PORT = "10.231.0.1", "10.231.0.2", 7000
SERVER = """
import socket, sys
from testbed.netem.owned.naming import check_run_id   # the host's testbed package, through the read-only mounts
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen()
while True:
    c, _ = s.accept()
    c.sendall(b"hello " + check_run_id(sys.argv[3]).encode() + b" " + sys.version.split()[0].encode())
    c.close()
"""


@contextmanager
def site_pair(run: str):
    """Namespaces tb-<run>-site and tb-<run>-peer joined by a veth; removed on every exit path."""
    from pyroute2 import IPRoute, netns

    site, peer = ns_name(run, "site"), ns_name(run, "peer")
    if_site, if_peer = if_name(run, "s"), if_name(run, "p")
    created: list[str] = []
    try:
        for ns in (site, peer):
            netns.create(ns)
            created.append(ns)
        with IPRoute() as ipr:
            ipr.link("add", ifname=if_site, kind="veth", net_ns_fd=site, peer={"ifname": if_peer, "net_ns_fd": peer})
        for ns, ifn, addr in ((site, if_site, SITE_ADDR), (peer, if_peer, PEER_ADDR)):
            with ipr_in(ns) as n:
                idx = n.link_lookup(ifname=ifn)[0]
                n.addr("add", index=idx, address=addr, prefixlen=24)
                n.link("set", index=idx, state="up")
                n.link("set", index=n.link_lookup(ifname="lo")[0], state="up")
        yield site, peer
    finally:
        for ns in created:
            netns.remove(ns)


def _greeting_from(peer: str, timeout_s: float = 15.0) -> bytes:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with in_netns(peer):
                conn = socket.create_connection((SITE_ADDR, PORT), timeout=5)
            with conn:
                return conn.recv(200)
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_container_server_in_a_site_namespace_is_reachable_and_everything_is_removed():
    run = new_run_id()
    t0 = time.perf_counter()
    with site_pair(run) as (site, peer), DockerEngine(run) as eng:
        daemon_pid, run_dir = eng.pid, eng.run_dir
        base = ensure_base_image(eng)
        again = ensure_base_image(eng)
        assert again.source == "engine" and again.tag == base.tag
        argv = [host_python(), "-c", SERVER, SITE_ADDR, str(PORT), run]
        with ContainerNode(eng, "site", site, argv, image=base.tag, host_python=True) as node:
            here = os.stat(ns_path(site))
            there = os.stat(node.netns_path)
            assert (there.st_dev, there.st_ino) == (here.st_dev, here.st_ino)
            assert any((root / f"tb-{run}").is_dir() for root in cgroup_roots())
            # the host's interpreter and testbed package, seen from another namespace at the site's address
            assert _greeting_from(peer) == f"hello {run} {sys.version.split()[0]}".encode()
            # exec'd commands are in the site's namespace too, without CAP_SYS_ADMIN (bit 21)
            dev = node.exec(["cat", "/proc/net/dev"], check=True).stdout
            assert if_name(run, "s") in dev
            cap_bnd = next(line for line in node.exec(["cat", "/proc/self/status"], check=True).stdout.splitlines()
                           if line.startswith("CapBnd:"))
            assert not int(cap_bnd.split()[1], 16) & (1 << 21)
            debian = node.exec(["python3", "-c", "import sys; print(sys.version.split()[0])"], check=True).stdout
            assert debian.startswith("3.11")
            print(f"\nengine {eng.start_s:.2f} s, image {base.source} (debootstrap {base.debootstrap_s:.1f} s, "
                  f"import {base.import_s:.1f} s), container {node.start_s:.2f} s")
        assert eng.run("ps", "-aq", "--filter", f"label=testbed.run={run}").stdout.split() == []
    print(f"total {time.perf_counter() - t0:.1f} s")
    assert not pid_alive(daemon_pid)
    assert not run_dir.exists()
    assert eng.leftovers == []
    assert not any((root / f"tb-{run}").exists() for root in cgroup_roots())
    with open("/proc/self/mountinfo") as mounts:
        assert not any(str(run_dir) in line for line in mounts)
    assert our_namespaces(run) == []


def test_recipe_hash_is_stable_and_follows_the_inputs():
    r = BaseImageRecipe()
    assert r.content_hash() == BaseImageRecipe().content_hash()
    assert BaseImageRecipe(packages=("python3", "iproute2")).content_hash() != r.content_hash()
    assert r.tag.startswith("testbed-base:")
    assert (CACHE_DIR / f"testbed-base-{r.content_hash()}.tar").parent == CACHE_DIR


def test_missing_dockerd_says_to_install_docker_io(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(shutil, "which", lambda *a, **k: None)
    with pytest.raises(RuntimeUnavailable, match="docker.io"):
        find_tools()
    with pytest.raises(RuntimeUnavailable, match="docker.io"):
        DockerEngine(new_run_id(), base_dir=tmp_path).start()
    assert list(tmp_path.iterdir()) == []


def test_a_persistent_data_root_keeps_the_image_and_is_locked(tmp_path):
    data = tmp_path / "docker-data"
    try:
        with DockerEngine(new_run_id(), data_root=data) as first:
            assert ensure_base_image(first).source in ("tarball", "built")
            second = DockerEngine(new_run_id(), data_root=data)
            with pytest.raises(RuntimeUnavailable, match="in use"):
                second.start()
            assert not second.run_dir.exists()
        assert data.is_dir() and not first.run_dir.exists()
        with DockerEngine(new_run_id(), data_root=data) as again:
            assert ensure_base_image(again).source == "engine"  # a second build is a no-op
    finally:
        shutil.rmtree(data, ignore_errors=True)
