"""Whether this machine can run a scenario on a live substrate, answered before anything is built:
a combination it cannot run is refused up front with one line, never half-way through a run.

Checked: the Python modules the scenario's kind of nodes needs (``torch`` for agents) and, for
``emulation.runtime: docker``, the private engine's tools, its image cache not locked by another
run's engine, and a way to the base image (the cached rootfs tarball, or debootstrap to build it). Root is the runner's check; Mininet's tools are the
mininet substrate's (:func:`testbed.substrate.mininet.switches.switch_unavailable`).
"""

from __future__ import annotations

import fcntl
import importlib.util
import os
import shutil
from pathlib import Path


def live_unavailable(scenario) -> str | None:
    """Why ``scenario`` cannot run on a live fabric here, or None."""
    from testbed.node_kinds import NODE_KINDS

    if importlib.util.find_spec("pyroute2") is None:  # an optional dependency: the simulator needs none of it
        return "pyroute2 is not installed (live fabrics are built with it): pip install -e '.[emulation]' (scripts/setup.sh does)"
    em = scenario.emulation
    kind = NODE_KINDS.get(em.nodes)
    missing = [m for m in kind.requires_modules if importlib.util.find_spec(m) is None]
    if missing:
        return f"nodes {kind.name!r} need {', '.join(missing)}, which is not installed"
    if em.runtime == "docker":
        return docker_unavailable()
    return None


def docker_unavailable() -> str | None:
    """Why the docker runtime cannot start its engine and base image here, or None."""
    from testbed.runtime.dockerd import find_tools
    from testbed.runtime.errors import RuntimeUnavailable
    from testbed.runtime.image import CACHE_DIR, BASE_REPO, BaseImageRecipe
    from testbed.substrate.emulated.agents import DOCKER_DATA_ROOT

    try:
        find_tools()
    except RuntimeUnavailable as e:
        return f"runtime 'docker': {e}"
    lock = Path(f"{DOCKER_DATA_ROOT}.lock")
    if lock.exists():  # the run's engine locks the image cache: one engine at a time uses it
        fd = os.open(lock, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return (f"runtime 'docker': the image cache {DOCKER_DATA_ROOT} is in use by another run's engine "
                    f"({lock} is locked); try again when it ends")
        finally:
            os.close(fd)  # releases it if taken
    tarball = CACHE_DIR / f"{BASE_REPO}-{BaseImageRecipe().content_hash()}.tar"
    if not tarball.exists() and shutil.which("debootstrap", path=os.environ.get("PATH", "") + ":/usr/sbin") is None:
        return ("runtime 'docker': no cached base image and no debootstrap to build it "
                "(`apt-get install -y debootstrap`; scripts/setup.sh does it as root)")
    return None
