"""A user's own image per site, made by the run's private engine without a registry.

Sources (``emulation.image`` / ``emulation.site_images``, :mod:`testbed.spec.images`):

- ``dockerfile``: ``docker build`` (the classic builder, ``DOCKER_BUILDKIT=0``: no buildx needed)
  with the Dockerfile's folder as context and ``--network host`` (the engine has no bridge), so a
  ``RUN apt-get``/``pip install`` reaches the registries the host reaches; nothing else is
  downloaded. ``FROM testbed-base`` names the testbed's base image (:mod:`testbed.runtime.image`
  tags it ``testbed-base:latest``); any other local image with a glibc at least as new as the
  host's works too.
- ``tar``: ``docker save`` output is loaded (``docker load``); a root file system tar is imported
  (``docker import``). Which one is read from the tar's member names.

Cache: the image is tagged ``<name>:<key>``, the key a content hash of the build context (every
file's path, mode and bytes) with the base image's recipe hash, or of the tar's bytes. A tag the
engine already holds is used as is (the engine's data-root is kept between runs), so an image is
built again only when its folder or tar changes; older tags of the same name are removed then.
Built and imported images carry the labels ``testbed.image-key`` and ``testbed.built-by-run``.

Before any container starts, :func:`check_runs_agent` runs the host's interpreter (bind-mounted
read-only, as the node agent's container has it) in the image, imports the agent, loads
``libstdc++.so.6`` (torch's C++ runtime; importing torch itself takes seconds) and looks for
``nsenter`` and ``setpriv``: an image that cannot run the agent is refused with one
line saying why (another CPU architecture, a C library older than the host's, no util-linux).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from testbed.errors import TestbedError
from testbed.runtime.container import Mount, host_python, host_python_mounts
from testbed.runtime.dockerd import DockerEngine
from testbed.runtime.errors import DockerCommandError
from testbed.spec.images import tar_kind as spec_tar_kind

KEY_VERSION = 1
KEY_LABEL = "testbed.image-key"
RUN_LABEL = "testbed.built-by-run"
DEFAULT_REPO_PREFIX = "testbed-user-"
BUILD_TIMEOUT_S = 1800.0
LOAD_TIMEOUT_S = 900.0
PROBE_TIMEOUT_S = 120.0
PROBE_MARK = "TESTBED-PROBE "
PROBE = f"""
import ctypes, json, shutil
tools = [t for t in ("nsenter", "setpriv") if shutil.which(t) is None]
libs = []
try:
    ctypes.CDLL("libstdc++.so.6")
except OSError:
    libs.append("libstdc++.so.6")
import testbed.agent.agent
print({PROBE_MARK!r} + json.dumps({{"tools": tools, "libs": libs}}))
"""
_ARCH = {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm", "ppc64le": "ppc64le", "s390x": "s390x"}


class UserImageError(TestbedError):
    """A user's image cannot be made or cannot run the node agent (the message names the site's field)."""

    exit_code = 2


@dataclass(frozen=True)
class UserImage:
    tag: str         # <name>:<key>
    id: str          # sha256:...
    source: str      # "engine" (cached), "built", "loaded" (docker load), "imported" (docker import)
    origin: str      # "dockerfile /path" | "tar /path"
    key: str
    seconds: float   # build, load or import (0 when cached)

    def describe(self) -> dict:
        return {"tag": self.tag, "id": self.id, "source": self.source, "from": self.origin,
                "make_s": round(self.seconds, 2)}


# -- cache keys -------------------------------------------------------------------------------------

def context_key(dockerfile: Path, base_key: str) -> str:
    """Content hash of a build: every entry under the Dockerfile's folder (path, kind, executable
    bit, bytes or link target), which file is the Dockerfile, and the base image's recipe hash."""
    dockerfile = Path(dockerfile)
    root = dockerfile.parent
    h = hashlib.sha256(json.dumps({"v": KEY_VERSION, "dockerfile": dockerfile.name, "base": base_key}).encode())
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        here = Path(dirpath)
        for name in sorted(filenames + [d for d in dirnames if (here / d).is_symlink()]):
            p = here / name
            rel = p.relative_to(root).as_posix()
            st = p.lstat()
            if stat.S_ISLNK(st.st_mode):
                h.update(f"L\0{rel}\0{os.readlink(p)}\0".encode())
            elif stat.S_ISREG(st.st_mode):
                h.update(f"F\0{rel}\0{int(bool(st.st_mode & 0o111))}\0{st.st_size}\0".encode())
                _hash_file(h, p)
        for d in dirnames:
            if not (here / d).is_symlink():
                h.update(f"D\0{(here / d).relative_to(root).as_posix()}\0".encode())
    return h.hexdigest()[:16]


def tar_key(tar: Path) -> str:
    h = hashlib.sha256(f"v{KEY_VERSION}\0tar\0".encode())
    _hash_file(h, Path(tar))
    return h.hexdigest()[:16]


def _hash_file(h, path: Path, chunk: int = 4 << 20) -> None:
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)


def repo_name(src) -> str:
    """The image name: the spec's ``tag``, else ``testbed-user-<Dockerfile's folder | tar's stem>``."""
    if src.tag:
        return src.tag
    base = src.path.parent.name if src.dockerfile is not None else src.path.name.split(".")[0]
    slug = re.sub(r"[^a-z0-9]+", "-", base.lower()).strip("-") or "image"
    return f"{DEFAULT_REPO_PREFIX}{slug}"[:100].rstrip("-")


def tar_kind(tar: Path) -> str:
    """``image`` (``docker save``/OCI layout: load) or ``rootfs`` (a file system: import)."""
    try:
        return spec_tar_kind(Path(tar))
    except ValueError as e:
        raise UserImageError(f"tar {tar}: {e}") from None


def image_key(src, base_key: str) -> str:
    return context_key(src.path, base_key) if src.dockerfile is not None else tar_key(src.path)


# -- making the image -------------------------------------------------------------------------------

def ensure_user_image(engine: DockerEngine, src, *, base_key: str) -> UserImage:
    """``<name>:<key>`` in ``engine``: as it is when there, else built, loaded or imported."""
    key = image_key(src, base_key)
    repo = repo_name(src)
    tag = f"{repo}:{key}"
    found = engine.run("image", "inspect", "--format", "{{.Id}}", tag, check=False)
    if found.returncode == 0:
        return UserImage(tag, found.stdout.strip(), "engine", src.describe(), key, 0.0)
    t0 = time.perf_counter()
    labels = ["--label", f"{KEY_LABEL}={key}", "--label", f"{RUN_LABEL}={engine.run_id}"]
    if src.dockerfile is not None:
        how = "built"
        _checked(engine, src, "build", "--network", "host", "--force-rm", "-f", str(src.path), *labels, "-t", tag,
                 str(src.path.parent), env={"DOCKER_BUILDKIT": "0"}, timeout_s=BUILD_TIMEOUT_S)
    elif tar_kind(src.path) == "image":
        how = "loaded"
        out = _checked(engine, src, "load", "-i", str(src.path), timeout_s=LOAD_TIMEOUT_S).stdout
        refs = [line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Loaded image")]
        if len(refs) != 1:
            raise UserImageError(f"tar {src.path}: holds {len(refs)} images; save one (`docker save IMAGE -o FILE`)")
        _checked(engine, src, "tag", refs[0], tag)
    else:
        how = "imported"
        _checked(engine, src, "import", *[a for lab in labels[1::2] for a in ("--change", f"LABEL {lab}")],
                 "--change", 'CMD ["/bin/sh"]', str(src.path), tag, timeout_s=LOAD_TIMEOUT_S)
    seconds = time.perf_counter() - t0
    image_id = engine.run("image", "inspect", "--format", "{{.Id}}", tag).stdout.strip()
    _drop_older(engine, repo, tag)
    return UserImage(tag, image_id, how, src.describe(), key, seconds)


def _checked(engine: DockerEngine, src, *args: str, env: dict[str, str] | None = None,
             timeout_s: float = 120.0):
    try:
        return engine.run(*args, env=env, timeout_s=timeout_s)
    except DockerCommandError as e:
        lines = [ln.strip() for ln in e.stderr.splitlines() if ln.strip() and "DEPRECATED" not in ln
                 and "legacy builder" not in ln and "buildx" not in ln and "BuildKit" not in ln]
        why = lines[-1] if lines else f"exit {e.returncode}"
        if args[0] == "build" and any(k in why for k in ("registry", "pull access denied", "manifest unknown",
                                                         "no such host")):
            why += (" (FROM names an image this engine does not hold and no registry gave it: FROM testbed-base, "
                    "or give that image as a tar)")
        raise UserImageError(f"{src.describe()}: docker {args[0]} failed: {why}") from None
    except Exception as e:  # subprocess.TimeoutExpired
        raise UserImageError(f"{src.describe()}: docker {args[0]} did not finish in {timeout_s:g} s") from e


def _drop_older(engine: DockerEngine, repo: str, keep: str) -> None:
    """Remove this name's other keys (older builds); an image a container uses stays (rmi refuses)."""
    listed = engine.run("images", "--format", "{{.Repository}}:{{.Tag}}", repo, check=False)
    for ref in listed.stdout.split() if listed.returncode == 0 else []:
        if ref != keep and not ref.endswith(":<none>"):
            engine.run("rmi", ref, check=False)


# -- can it run the agent? --------------------------------------------------------------------------

def host_arch() -> str:
    return _ARCH.get(platform.machine(), platform.machine())


def probe_args(tag: str, mounts: list[Mount]) -> list[str]:
    """``docker run`` of the host's interpreter in the image (no network), as the agent's container runs it."""
    args = ["run", "--rm", "--network", "none", "--user", "0:0", "--entrypoint", host_python(),
            "-e", "PYTHONDONTWRITEBYTECODE=1"]
    for m in mounts:
        args += ["-v", m.arg()]
    return [*args, tag, "-c", PROBE]


def check_runs_agent(engine: DockerEngine, image: UserImage) -> None:
    """Refuse (UserImageError, one line) an image the node agent cannot run in."""
    arch = engine.run("image", "inspect", "--format", "{{.Os}}/{{.Architecture}}", image.tag).stdout.strip()
    if arch != f"linux/{host_arch()}":
        engine.run("rmi", image.tag, check=False)
        raise UserImageError(f"{image.origin}: image {image.tag} is for {arch}; this machine runs linux/{host_arch()}")
    try:
        done = engine.run(*probe_args(image.tag, host_python_mounts()), check=False, timeout_s=PROBE_TIMEOUT_S)
    except Exception as e:  # subprocess.TimeoutExpired
        raise UserImageError(f"{image.origin}: the node agent did not start in {image.tag} within "
                             f"{PROBE_TIMEOUT_S:g} s") from e
    why = probe_verdict(done.returncode, done.stdout, done.stderr)
    if why:
        engine.run("rmi", image.tag, check=False)  # not kept: the cache holds images that run
        raise UserImageError(f"{image.origin}: image {image.tag} cannot run the node agent: {why}")


def probe_verdict(returncode: int, stdout: str, stderr: str) -> str | None:
    """Why a probe's outcome means the agent cannot run in the image, or None."""
    marked = [ln[len(PROBE_MARK):] for ln in stdout.splitlines() if ln.startswith(PROBE_MARK)]
    if returncode == 0 and marked:
        found = json.loads(marked[-1])
        if found["tools"]:
            return (f"no {' and no '.join(found['tools'])} in it (util-linux; the agent's container enters the "
                    "site's namespace with them)")
        if found["libs"]:
            return (f"no {' and no '.join(found['libs'])} in it (the C++ runtime torch needs, which the agent "
                    "trains with: Debian's libstdc++6)")
        return None
    err = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    text = " ".join(err)
    if "GLIBC_" in text or "GLIBCXX_" in text:
        ver = re.search(r"GLIBC(XX)?_[0-9.]+", text)
        return (f"its C library is older than the host's (the host's Python needs {ver.group(0) if ver else 'a newer one'}); "
                "start it FROM testbed-base or an image of the host's Debian release or newer")
    if "no such file or directory" in text.lower() and ("exec" in text.lower() or "OCI runtime" in text):
        return ("the host's Python cannot start in it (no dynamic loader or C library at the host's paths: a "
                "static or musl image such as Alpine?); start it FROM testbed-base")
    if "ModuleNotFoundError" in text or "ImportError" in text:
        return f"the host's Python starts but cannot import the agent: {err[-1]}"
    return f"the probe exited {returncode}: {err[-1] if err else 'no output'}"
