"""Build (once) and cache the guest image: a Debian kernel, a busybox initramfs and an ext4 root
filesystem made by ``debootstrap --variant=minbase`` of the host's own Debian release.

Everything comes from Debian packages: ``apt-get download`` fetches ``linux-image-<abi>-amd64``
and ``busybox-static``; ``debootstrap`` makes the root filesystem with the guest's packages.
The image is cached under ``<cache>/<key>/`` where the key hashes every input (release, mirror,
exact kernel and busybox package versions, package list, the boot scripts), so a new kernel in
the archive or a change to the scripts builds a new image and an unchanged one is reused.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterator

from testbed.vm import cpio, initramfs, kmod
from testbed.vm.errors import VmError

BUILDER_VERSION = 1  # bump when the build changes in a way the inputs do not show
DEFAULT_MIRROR = "http://deb.debian.org/debian"
# Debian packages of the guest's root filesystem (besides minbase). The project's Python code
# and its pure-Python dependencies are not installed: they come from the host for each boot
# (testbed/vm/payload.py).
GUEST_PACKAGES = ("python3", "iproute2", "iputils-ping", "kmod", "openvswitch-switch")
# Kernel modules copied into the root filesystem (with their dependencies); the kernel loads
# them on demand (a netem qdisc loads sch_netem). Every qdisc, classifier and action, too.
# tcp_diag: ``ss -i`` reads TCP's counters (bytes_acked) through it, else only /proc/net/tcp's few.
GUEST_MODULES = ("veth", "dummy", "ifb", "bridge", "openvswitch", "tun", "8021q", "inet_diag", "tcp_diag")
GUEST_MODULE_DIRS = ("kernel/net/sched",)
ARTIFACTS = ("vmlinuz", "initramfs.cpio", "root.ext4", "manifest.json")


def default_cache_dir() -> Path:
    env = os.environ.get("TESTBED_VM_CACHE")
    if env:
        return Path(env)
    if os.geteuid() == 0:
        return Path("/var/cache/testbed/vm")
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "testbed" / "vm"


@dataclass(frozen=True)
class GuestInputs:
    """Everything the image is made from; its hash names the cache entry."""

    release: str
    mirror: str
    kernel_package: str
    kernel_version: str
    busybox_version: str
    packages: tuple[str, ...] = GUEST_PACKAGES
    modules: tuple[str, ...] = GUEST_MODULES

    def key(self) -> str:
        blob = json.dumps({**asdict(self), "builder": BUILDER_VERSION, "init": initramfs.INIT,
                           "guest_init": initramfs.GUEST_INIT, "boot_modules": initramfs.BOOT_MODULES,
                           "module_dirs": GUEST_MODULE_DIRS}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Image:
    """A built image in the cache."""

    dir: Path
    manifest: dict

    @property
    def kernel(self) -> Path:
        return self.dir / "vmlinuz"

    @property
    def initrd(self) -> Path:
        return self.dir / "initramfs.cpio"

    @property
    def root(self) -> Path:
        return self.dir / "root.ext4"


def _run(argv: list[str], what: str, *, timeout_s: float = 600, **kw) -> subprocess.CompletedProcess:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, **kw)
    except FileNotFoundError as e:
        raise VmError(f"{what}: {argv[0]} not found (bash scripts/setup.sh installs it as root)") from e
    except subprocess.TimeoutExpired as e:
        raise VmError(f"{what}: no result after {timeout_s:.0f} s") from e
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
        raise VmError(f"{what} failed (exit {done.returncode}):\n{tail}")
    return done


def host_release(os_release: Path = Path("/etc/os-release")) -> str:
    """The host's Debian codename: the guest is built from the same release."""
    fields = {}
    for line in os_release.read_text().splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            fields[k] = v.strip().strip('"')
    if fields.get("ID") != "debian" or not fields.get("VERSION_CODENAME"):
        raise VmError(f"the guest is built from the host's Debian release; this host is {fields.get('ID', '?')} "
                      "(use the Vagrantfile to get a Debian machine)")
    return fields["VERSION_CODENAME"]


def _candidate(package: str) -> str:
    out = _run(["apt-cache", "show", "--no-all-versions", package], f"apt-cache show {package}").stdout
    for line in out.splitlines():
        if line.startswith("Version:"):
            return line.split(":", 1)[1].strip()
    raise VmError(f"no version of {package} in the apt lists (run apt-get update)")


def apt_mirror(release: str, etc_apt: Path = Path("/etc/apt")) -> str:
    """The Debian mirror the host's apt uses for ``release`` (so a local mirror or proxy is used
    for the guest too); ``deb.debian.org`` if none is found."""
    files = [etc_apt / "sources.list", *sorted((etc_apt / "sources.list.d").glob("*"))]
    for f in files:
        if not f.is_file():
            continue
        text = f.read_text(errors="replace")
        if f.suffix == ".sources":  # deb822: paragraphs of "Key: value"
            for para in text.split("\n\n"):
                fields = dict(ln.split(":", 1) for ln in para.splitlines() if ":" in ln and not ln.startswith("#"))
                fields = {k.strip(): v.split() for k, v in fields.items()}
                if "deb" in fields.get("Types", []) and release in fields.get("Suites", []) and fields.get("URIs"):
                    return fields["URIs"][0].rstrip("/")
        else:
            for ln in text.splitlines():
                words = [w for w in ln.split() if not w.startswith("[")]  # drop [signed-by=...] options
                if len(words) >= 3 and words[0] == "deb" and words[2] == release:
                    return words[1].rstrip("/")
    return DEFAULT_MIRROR


def refresh_apt_lists() -> None:
    """``apt-get update``: a build fetches exact package versions, which stale lists may not name."""
    _run(["apt-get", "update", "-qq"], "apt-get update", timeout_s=300)


def resolve_inputs(mirror: str | None = None) -> GuestInputs:
    """The current inputs, from the host's apt lists (no network)."""
    deps = _run(["apt-cache", "depends", "linux-image-amd64"], "apt-cache depends linux-image-amd64").stdout
    kernels = [ln.split(":", 1)[1].strip() for ln in deps.splitlines()
               if ln.strip().startswith("Depends:") and "linux-image-" in ln]
    if not kernels:
        raise VmError("linux-image-amd64 names no kernel package in the apt lists (run apt-get update)")
    release = host_release()
    return GuestInputs(release=release, mirror=mirror or os.environ.get("TESTBED_VM_MIRROR") or apt_mirror(release),
                       kernel_package=kernels[0], kernel_version=_candidate(kernels[0]),
                       busybox_version=_candidate("busybox-static"))


@contextmanager
def _locked(cache: Path) -> Iterator[None]:
    """One build at a time per cache directory (two test runs must not build into each other)."""
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def cached(inputs: GuestInputs, cache: Path | None = None) -> Image | None:
    d = (cache or default_cache_dir()) / inputs.key()
    if all((d / a).is_file() for a in ARTIFACTS):
        return Image(d, json.loads((d / "manifest.json").read_text()))
    return None


def ensure_image(inputs: GuestInputs | None = None, cache: Path | None = None, *, force: bool = False,
                 log: Callable[[str], None] = print) -> Image:
    """The cached image for ``inputs`` (default: the current ones), built first if missing.
    Before building for the current inputs, the apt lists are refreshed (and the inputs resolved
    again): the build downloads exact versions, which must still be in the archive."""
    current = inputs is None
    inputs = inputs or resolve_inputs()
    cache = cache or default_cache_dir()
    with _locked(cache):
        if not force and (img := cached(inputs, cache)) is not None:
            return img
        if os.geteuid() != 0:
            raise VmError("building the guest image needs root (debootstrap, chroot)")
        if current:
            refresh_apt_lists()
            inputs = resolve_inputs()
            if not force and (img := cached(inputs, cache)) is not None:
                return img
        final = cache / inputs.key()
        work = cache / f"{inputs.key()}.build-{os.getpid()}"
        shutil.rmtree(work, ignore_errors=True)
        try:
            _build(inputs, work, log)
            shutil.rmtree(final, ignore_errors=True)
            work.rename(final)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        for stale in cache.iterdir():  # one image at a time: older kernels, scripts, interrupted builds
            if stale.is_dir() and stale != final:
                log(f"vm: removing the stale image {stale}")
                shutil.rmtree(stale, ignore_errors=True)
        return Image(final, json.loads((final / "manifest.json").read_text()))


def _build(inputs: GuestInputs, work: Path, log: Callable[[str], None]) -> None:
    t0 = time.monotonic()
    tmp = work / "tmp"
    debs, rootfs = tmp / "debs", tmp / "rootfs"
    debs.mkdir(parents=True)
    log(f"vm: building the guest image {inputs.key()} ({inputs.release}, {inputs.kernel_package} "
        f"{inputs.kernel_version}) in {work}")
    _run(["apt-get", "download", "-q", "-o", "APT::Sandbox::User=root",
          f"{inputs.kernel_package}={inputs.kernel_version}", f"busybox-static={inputs.busybox_version}"],
         "apt-get download", cwd=debs)
    for deb in sorted(debs.glob("*.deb")):
        _run(["dpkg-deb", "-x", str(deb), str(tmp / "pkg")], f"dpkg-deb -x {deb.name}")
    log(f"vm: debootstrap {inputs.release} ({len(inputs.packages)} extra packages), about a minute")
    _run(["debootstrap", "--variant=minbase", f"--include={','.join(inputs.packages)}", inputs.release,
          str(rootfs), inputs.mirror], "debootstrap", timeout_s=1200)
    kver = _kernel_release(tmp / "pkg")
    _install_modules(tmp / "pkg" / "lib" / "modules" / kver, rootfs, kver)
    _finish_rootfs(rootfs)
    shutil.copyfile(tmp / "pkg" / "boot" / f"vmlinuz-{kver}", work / "vmlinuz")
    mods_dir = tmp / "pkg" / "lib" / "modules" / kver
    avail = kmod.index(mods_dir)
    boot = kmod.load_order(list(initramfs.BOOT_MODULES), avail, kmod.builtin(mods_dir))
    with open(work / "initramfs.cpio", "wb") as fh:
        cpio.write(fh, initramfs.entries(tmp / "pkg" / "bin" / "busybox", [(m, avail[m]) for m in boot]))
    python = os.readlink(rootfs / "usr" / "bin" / "python3")
    _make_ext4(rootfs, work / "root.ext4")
    shutil.rmtree(tmp)
    manifest = {"key": inputs.key(), "inputs": asdict(inputs), "kernel_release": kver, "guest_python": python,
                "boot_modules": boot, "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "build_s": round(time.monotonic() - t0, 1),
                "bytes": {a: (work / a).stat().st_size for a in ARTIFACTS[:-1]}}
    (work / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    log(f"vm: image built in {manifest['build_s']} s")


def _kernel_release(pkg: Path) -> str:
    releases = sorted(p.name for p in (pkg / "lib" / "modules").iterdir())
    if len(releases) != 1:
        raise VmError(f"expected one kernel in the package, found {releases}")
    return releases[0]


def _install_modules(src: Path, rootfs: Path, kver: str) -> None:
    """Copy the modules the guest may load (and their dependencies), then depmod in the guest's
    root so the kernel can load them on demand (``modprobe``, ``request_module``)."""
    avail = kmod.index(src)
    wanted = list(initramfs.BOOT_MODULES) + list(GUEST_MODULES)
    for d in GUEST_MODULE_DIRS:
        wanted += sorted(kmod.module_name(p) for p in (src / d).rglob("*.ko"))
    dst = rootfs / "lib" / "modules" / kver
    for name in kmod.load_order(wanted, avail, kmod.builtin(src)):
        target = dst / avail[name].relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(avail[name], target)
    for meta in ("modules.builtin", "modules.builtin.modinfo", "modules.order"):
        if (src / meta).exists():
            shutil.copyfile(src / meta, dst / meta)
    _run(["chroot", str(rootfs), "/sbin/depmod", "-a", kver], "depmod in the guest root")


def _finish_rootfs(rootfs: Path) -> None:
    """Our init, mount points for the host's shares, and no caches or docs."""
    init = rootfs / "sbin" / "tb-guest-init"
    init.write_text(initramfs.GUEST_INIT)
    init.chmod(0o755)
    (rootfs / initramfs.OUT_DIR.lstrip("/")).mkdir(exist_ok=True)
    (rootfs / "etc" / "hostname").write_text("tb-guest\n")
    for junk in ("var/cache/apt", "var/lib/apt/lists", "usr/share/doc", "usr/share/man", "usr/share/locale",
                 "usr/share/info"):
        shutil.rmtree(rootfs / junk, ignore_errors=True)
        (rootfs / junk).mkdir(parents=True, exist_ok=True)


def _make_ext4(rootfs: Path, image: Path) -> None:
    used = int(_run(["du", "-sxb", str(rootfs)], "du").stdout.split()[0])
    size_mb = int(used * 1.25 / 2**20) + 64
    with open(image, "wb") as fh:
        fh.truncate(size_mb * 2**20)
    _run(["mkfs.ext4", "-q", "-F", "-L", "tbroot", "-O", "^has_journal", "-E", "root_owner=0:0",
          "-d", str(rootfs), str(image)], "mkfs.ext4")


def clean(cache: Path | None = None) -> list[Path]:
    """Remove every cached image (and leftovers of interrupted builds); returns what was removed."""
    cache = cache or default_cache_dir()
    if not cache.is_dir():
        return []
    removed = []
    with _locked(cache):
        for entry in sorted(cache.iterdir()):
            if entry.is_dir():
                shutil.rmtree(entry)
                removed.append(entry)
    return removed
