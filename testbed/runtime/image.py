"""The base image, built without a registry: ``debootstrap`` -> tar -> ``docker import``.

Recipe: Debian ``bookworm`` ``minbase`` plus ``python3``. Debian's python3 pulls in the shared
libraries (libssl3, libffi8, libsqlite3, ...) that the host's own interpreter needs, and it lets
the Dockerfile path (``containers/Dockerfile``) install testbed into the image. ``minbase``
already has ``nsenter`` and ``setpriv`` (util-linux), which ``container.py`` uses to enter a
site's namespace.

Nodes do not run testbed from a copy inside the image: ``container.host_python_mounts()`` binds
the host's interpreter install, its venv and the repository read-only at the same paths, so the
container runs the exact interpreter and packages of the host (a bookworm rootfs has the same
glibc and library ABI as the bookworm host they were built on).

Caching, by a content hash of the recipe (suite, variant, packages, architecture, recipe
version; the mirror is a transport and is not hashed):

- ``/var/cache/testbed/images/testbed-base-<hash>.tar`` (``TESTBED_IMAGE_CACHE``): the trimmed
  rootfs; debootstrap (~40 s) runs only when it is missing;
- the image ``testbed-base:<hash>`` in the engine: import (~3 s) runs only when the engine's
  data-root lacks it (a persistent ``DockerEngine(data_root=...)`` keeps it across runs). It is
  also tagged ``testbed-base:latest``, the stable name a user's Dockerfile says ``FROM testbed-base``
  to (:mod:`testbed.runtime.user_image`).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import platform
import shutil
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from testbed.runtime.dockerd import DockerEngine, unmount_under
from testbed.runtime.errors import DockerCommandError, RuntimeUnavailable

CACHE_DIR = Path(os.environ.get("TESTBED_IMAGE_CACHE", "/var/cache/testbed/images"))
BASE_REPO = "testbed-base"
BASE_STABLE_TAG = f"{BASE_REPO}:latest"  # what a user's Dockerfile names: `FROM testbed-base`; moved to the current recipe
RECIPE_VERSION = 2
DEFAULT_MIRROR = "http://deb.debian.org/debian"
APT_SOURCES = (Path("/etc/apt/sources.list"), Path("/etc/apt/sources.list.d"))
DEBOOTSTRAP_TIMEOUT_S = 900.0
IMPORT_TIMEOUT_S = 600.0
# Trimmed like Debian's "slim" images (docs, man pages, translations; copyrights kept), now and for
# later `apt-get install`s in a derived image: a smaller tarball imports faster (import is I/O bound).
SLIM_DPKG_CFG = """path-exclude=/usr/share/doc/*
path-include=/usr/share/doc/*/copyright
path-exclude=/usr/share/man/*
path-exclude=/usr/share/info/*
path-exclude=/usr/share/locale/*
path-include=/usr/share/locale/locale.alias
"""


def _dpkg_arch() -> str:
    try:
        return subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())


@dataclass(frozen=True)
class BaseImageRecipe:
    suite: str = "bookworm"
    variant: str = "minbase"
    packages: tuple[str, ...] = ("python3",)
    arch: str = field(default_factory=_dpkg_arch)

    def content_hash(self) -> str:
        spec = {"recipe_version": RECIPE_VERSION, **asdict(self), "packages": sorted(self.packages)}
        return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:12]

    @property
    def tag(self) -> str:
        return f"{BASE_REPO}:{self.content_hash()}"

    def debootstrap_argv(self, rootfs: Path, mirror: str) -> list[str]:
        argv = ["debootstrap", f"--variant={self.variant}", f"--arch={self.arch}"]
        if self.packages:
            argv.append("--include=" + ",".join(sorted(self.packages)))
        return [*argv, self.suite, str(rootfs), mirror]


@dataclass
class BaseImage:
    tag: str
    source: str  # "engine" (already there), "tarball" (imported from the cache), "built" (debootstrap, then import)
    tarball: Path | None = None
    debootstrap_s: float = 0.0
    import_s: float = 0.0


def debian_mirror(suite: str = "bookworm", sources: tuple[Path, ...] = APT_SOURCES) -> str:
    """The Debian mirror apt is configured with (``TESTBED_DEBIAN_MIRROR`` wins): the first ``deb``
    source that serves ``suite`` with ``main``, from one-line ``.list`` or deb822 ``.sources`` files."""
    if os.environ.get("TESTBED_DEBIAN_MIRROR"):
        return os.environ["TESTBED_DEBIAN_MIRROR"]
    files: list[Path] = []
    for src in sources:
        if src.is_dir():
            files += sorted(src.glob("*.list")) + sorted(src.glob("*.sources"))
        else:
            files.append(src)
    for f in files:
        try:
            text = f.read_text()
        except OSError:
            continue
        for uri, suites, comps in (_deb822(text) if f.suffix == ".sources" else _one_line(text)):
            if suite in suites and "main" in comps:
                return uri.rstrip("/")
    return DEFAULT_MIRROR


def _one_line(text: str):
    for line in text.splitlines():
        words = line.split("#", 1)[0].split()
        if words[:1] != ["deb"]:
            continue
        if len(words) > 1 and words[1].startswith("["):  # options: [arch=amd64 signed-by=...]
            end = next((i for i, w in enumerate(words) if w.endswith("]")), len(words) - 1)
            words = [words[0], *words[end + 1:]]
        if len(words) >= 4:
            yield words[1], [words[2]], words[3:]


def _deb822(text: str):
    for para in text.split("\n\n"):
        fields: dict[str, str] = {}
        for line in para.splitlines():
            if ":" in line and not line.startswith(("#", " ")):
                key, value = line.split(":", 1)
                fields[key.strip().lower()] = value.strip()
        if "deb" in fields.get("types", "").split() and fields.get("enabled", "yes") != "no":
            for uri in fields.get("uris", "").split():
                yield uri, fields.get("suites", "").split(), fields.get("components", "").split()


def build_rootfs_tarball(recipe: BaseImageRecipe, *, run_id: str, mirror: str | None = None,
                         cache_dir: Path = CACHE_DIR) -> tuple[Path, float]:
    """The cached rootfs tarball of ``recipe``, built with debootstrap if missing.
    Returns (path, seconds spent in debootstrap: 0 when cached)."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    h = recipe.content_hash()
    tarball = cache_dir / f"{BASE_REPO}-{h}.tar"
    with open(cache_dir / f"{BASE_REPO}-{h}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build per recipe at a time; the others wait and reuse it
        if tarball.exists():
            return tarball, 0.0
        if shutil.which("debootstrap", path=os.environ.get("PATH", "") + ":/usr/sbin") is None:
            raise RuntimeUnavailable("no debootstrap to build the base image: install Debian's debootstrap "
                                     "(`apt-get install -y debootstrap`; scripts/setup.sh does it as root)")
        work = cache_dir / f".build-{run_id}-{h}"
        work.mkdir()
        try:
            t0 = time.perf_counter()
            _debootstrap(recipe, work, mirror or debian_mirror(recipe.suite))
            seconds = time.perf_counter() - t0
            _run(["tar", "-C", str(work / "rootfs"), "--numeric-owner", "-cf", str(work / "rootfs.tar"), "."], 600)
            os.replace(work / "rootfs.tar", tarball)
            return tarball, seconds
        finally:
            unmount_under(work)  # debootstrap mounts /proc and /sys in the target; never rmtree through them
            shutil.rmtree(work)


def _debootstrap(recipe: BaseImageRecipe, work: Path, mirror: str) -> None:
    rootfs = work / "rootfs"
    _run(recipe.debootstrap_argv(rootfs, mirror), DEBOOTSTRAP_TIMEOUT_S, log=work / "debootstrap.log")
    for pattern in ("var/cache/apt/archives/*.deb", "var/cache/apt/*.bin", "var/lib/apt/lists/*_*"):
        for f in rootfs.glob(pattern):
            f.unlink()
    _slim(rootfs)
    meta = {"recipe": asdict(recipe), "hash": recipe.content_hash(), "mirror": mirror}
    (rootfs / "etc" / "testbed-base.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")


def _slim(rootfs: Path) -> None:
    (rootfs / "etc/dpkg/dpkg.cfg.d/testbed-slim").write_text(SLIM_DPKG_CFG)
    for sub in ("usr/share/man", "usr/share/info", "usr/share/locale"):
        for child in (rootfs / sub).glob("*"):
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            elif child.name != "locale.alias":
                child.unlink()
    for f in list((rootfs / "usr/share/doc").rglob("*")):
        if f.is_symlink() or (f.is_file() and f.name != "copyright"):
            f.unlink()


def _run(argv: list[str], timeout_s: float, log: Path | None = None) -> None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        raise DockerCommandError(argv, -1, f"timed out after {timeout_s:g} s") from e
    if log is not None:
        log.write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        raise DockerCommandError(argv, done.returncode, done.stderr or done.stdout)


def ensure_base_image(engine: DockerEngine, recipe: BaseImageRecipe | None = None, *, mirror: str | None = None,
                      cache_dir: Path = CACHE_DIR) -> BaseImage:
    """``testbed-base:<hash>`` in ``engine``: a no-op when it is there, an import when the tarball
    is cached, otherwise debootstrap then import."""
    recipe = recipe or BaseImageRecipe()
    tag = recipe.tag
    if engine.run("image", "inspect", "--format", "{{.Id}}", tag, check=False).returncode == 0:
        engine.run("tag", tag, BASE_STABLE_TAG)
        return BaseImage(tag, "engine")
    tarball, debootstrap_s = build_rootfs_tarball(recipe, run_id=engine.run_id, mirror=mirror, cache_dir=cache_dir)
    t0 = time.perf_counter()
    engine.run("import", "--change", f"LABEL testbed.base={recipe.content_hash()}", "--change", 'CMD ["/bin/bash"]',
               str(tarball), tag, timeout_s=IMPORT_TIMEOUT_S)
    engine.run("tag", tag, BASE_STABLE_TAG)
    return BaseImage(tag, "built" if debootstrap_s else "tarball", tarball, debootstrap_s, time.perf_counter() - t0)


def main(argv: list[str] | None = None) -> int:
    """``python -m testbed.runtime.image``: build (or find) the cached rootfs tarball and print
    ``<tarball> <tag>``, for ``docker import <tarball> <tag>`` into any engine (see containers/README.md)."""
    import argparse

    from testbed.netem.owned.naming import new_run_id

    p = argparse.ArgumentParser(prog="python -m testbed.runtime.image", description=main.__doc__)
    p.add_argument("--mirror", help="Debian mirror (default: the one apt uses)")
    p.add_argument("--cache-dir", type=Path, default=CACHE_DIR)
    args = p.parse_args(argv)
    recipe = BaseImageRecipe()
    tarball, _ = build_rootfs_tarball(recipe, run_id=new_run_id(), mirror=args.mirror, cache_dir=args.cache_dir)
    print(tarball, recipe.tag)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
