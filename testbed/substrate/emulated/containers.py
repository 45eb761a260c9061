"""The ``docker`` node runtime: each site's agent in a container whose processes live in the site's
network namespace (the Containernet way), on a private Docker engine started for the run and stopped
after it. Its entry in :data:`testbed.node_kinds.NODE_RUNTIMES` names the three hooks below: the
launcher, why this machine cannot start it, and its line in ``testbed doctor``."""

from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path

from testbed.netem.owned import state
from testbed.substrate.emulated.agents import AgentPool, SiteLauncher

DOCKER_DATA_ROOT = Path("/var/lib/testbed/docker-data")  # image cache kept between runs (locked while in use)


class DockerLauncher(SiteLauncher):
    """Starts the run's engine at the first site (the base image, each site's own image built or
    loaded and checked to run the agent, refused before any container starts, and the GPU request),
    then a container per site; ``docker kill`` ends one; stop removes them and ends the engine."""

    def __init__(self, pool: AgentPool):
        super().__init__(pool)
        self._engine = None
        self._containers: dict = {}

    def _start_engine(self) -> None:
        from testbed.runtime import DockerEngine, ensure_base_image
        from testbed.runtime.gpus import gpu_request
        from testbed.runtime.image import BaseImageRecipe
        from testbed.runtime.user_image import UserImageError, check_runs_agent, ensure_user_image

        pool = self.pool
        engine = DockerEngine(pool.run_id, data_root=DOCKER_DATA_ROOT)
        state.add(pool.run_id, cgroups=[engine.cgroup_name], engine_dirs=[str(engine.run_dir)])
        pool.keep_cgroup(engine.cgroup_name)
        self._engine = engine
        self._engine.__enter__()
        state.add(pool.run_id, pids=[self._engine.pid])  # testbed clean ends it by PID
        self._image = ensure_base_image(self._engine)
        made: dict = {}
        self._site_images = {}
        for site, (field, src) in pool.image_sources.items():
            if src not in made:
                try:
                    made[src] = ensure_user_image(self._engine, src, base_key=BaseImageRecipe().content_hash())
                    check_runs_agent(self._engine, made[src])
                except UserImageError as e:  # the scenario's field first, as spec errors are
                    raise UserImageError(f"{field}: {e}") from None
            self._site_images[site] = made[src]
        self._gpus, gpu_note = gpu_request()
        base_id = self._engine.run("image", "inspect", "--format", "{{.Id}}", self._image.tag).stdout.strip()
        self.runtime_info.update({
            "base_image": {"tag": self._image.tag, "id": base_id, "source": self._image.source},
            "images": {s.name: (self._site_images[s.name].describe() if s.name in self._site_images
                                else {"tag": self._image.tag, "id": base_id, "from": "testbed-base"})
                       for s in pool.fabric.plan.sites},
            "gpus": self._gpus or "none", **({"gpu_note": gpu_note} if gpu_note else {}),
        })

    def start(self, site: str, argv: list[str]) -> None:
        from testbed.runtime import ContainerNode
        from testbed.runtime.container import Mount

        if self._engine is None:
            self._start_engine()
        pool = self.pool
        image = self._site_images[site].tag if site in self._site_images else self._image.tag
        mounts = [Mount(str(pool.workdir), str(pool.workdir), read_only=False)]
        # a program's host folder, at the same path and writable as in the process runtime; a cwd the
        # host does not have is the image's own
        mounts += [Mount(d, d, read_only=False) for d in pool.program_dirs if Path(d).is_dir() and d != "/"]
        node = ContainerNode(self._engine, site, pool.fabric.site_ns(site), argv, image=image, mounts=mounts,
                             host_python=True, gpus=self._gpus)
        node.__enter__()
        self._containers[site] = node

    def kill(self, site: str) -> None:
        self._engine.run("kill", self._containers[site].id)

    def stop(self, pids: list[int]) -> None:
        for node in self._containers.values():
            node.__exit__(None, None, None)
        self._containers.clear()
        if self._engine is not None:
            engine, self._engine = self._engine, None
            if engine.pid:
                pids.append(engine.pid)
            engine.__exit__(None, None, None)
            if not engine.run_dir.exists():
                state.discard(self.pool.run_id, engine_dirs=[str(engine.run_dir)])


def docker_unavailable(scenario=None) -> str | None:
    """Why the docker runtime cannot start its engine and base image here, or None: the private
    engine's tools, its image cache not locked by another run's engine, and a way to the base image
    (the cached rootfs tarball, or debootstrap to build it)."""
    from testbed.runtime.dockerd import find_tools
    from testbed.runtime.errors import RuntimeUnavailable
    from testbed.runtime.image import CACHE_DIR, BASE_REPO, BaseImageRecipe

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


def docker_doctor(caps: dict) -> tuple[list[str], str]:
    """``testbed doctor``'s line: a live fabric (as netns's) and an engine, running or started by hand."""
    from testbed.doctor.report import available, network_needs

    how = "running engine" if available(caps, "docker_engine") else \
        "dockerd started by hand" if available(caps, "dockerd") else ""
    return network_needs(caps) + ([] if how else ["docker_engine"]), f"nodes in containers ({how})"
