"""Build a Vagrant base box (libvirt provider) of Debian, locally, from Debian packages only: no box
catalogue. Made the way ``testbed vm`` makes its guest (``debootstrap`` of the host's release from
the host's apt mirror, an ext4 image made with ``mkfs.ext4 -d``), plus what Vagrant needs:

- a full boot: Debian's kernel and initramfs inside the image, booted by EXTLINUX installed in
  the first sector of the (unpartitioned) ext4 disk; systemd, DHCP on ``eth0``;
- the ``vagrant`` user with password-less sudo and an SSH key generated for this box (the
  private half ships in the box; the box's own Vagrantfile points Vagrant at it), ``sshd``,
  ``rsync`` (for the synced folder);
- a first-boot unit: new SSH host keys for every VM, and the root filesystem grown to the disk
  Vagrant gives the VM (``machine_virtual_size``).

    python -m testbed.vm.box [--force]          # builds (or reuses) the box; prints its path
    vagrant box add --name testbed/bookworm-local PATH

Needs root (debootstrap, chroot, a loop mount for EXTLINUX). The box is cached under the
``testbed vm`` cache folder, keyed by its inputs; an unchanged box is reused.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Callable

from testbed.vm.errors import VmError
from testbed.vm.image import _locked, _run, apt_mirror, default_cache_dir, host_release

BOX_BUILDER_VERSION = 1
BOX_NAME = "testbed/bookworm-local"
BOX_FILE = "testbed-bookworm.box"
DISK_GB = 20      # the box's disk (sparse qcow2); a Vagrantfile may ask for more (machine_virtual_size)
BOX_PACKAGES = ("linux-image-amd64", "initramfs-tools", "systemd-sysv", "udev", "dbus", "openssh-server", "sudo",
                "rsync", "ifupdown", "isc-dhcp-client", "ca-certificates", "python3", "python3-venv",
                "e2fsprogs", "kmod", "iproute2", "procps", "less", "apt-transport-https")
KERNEL_CMDLINE = "root=/dev/vda rw console=ttyS0 net.ifnames=0 biosdevname=0"

FIRSTBOOT = """\
[Unit]
Description=testbed box first boot: SSH host keys, grow the root filesystem to the disk
DefaultDependencies=no
After=local-fs.target
Before=ssh.service network-pre.target

[Service]
Type=oneshot
ExecStart=/usr/bin/ssh-keygen -A
ExecStart=-/sbin/resize2fs /dev/vda
RemainAfterExit=yes

[Install]
WantedBy=multi-user.target
"""

BOX_VAGRANTFILE = """\
# The box's own settings (read before the project's Vagrantfile): its generated SSH key.
Vagrant.configure("2") do |config|
  config.ssh.username = "vagrant"
  config.ssh.private_key_path = File.expand_path("vagrant_key", __dir__)
  config.ssh.insert_key = false
  config.vm.provider :libvirt do |lv|
    lv.disk_bus = "virtio"
    lv.nic_model_type = "virtio"
    lv.graphics_type = "none"
  end
end
"""


def box_key(release: str, mirror: str) -> str:
    blob = json.dumps({"release": release, "mirror": mirror, "packages": BOX_PACKAGES, "cmdline": KERNEL_CMDLINE,
                       "builder": BOX_BUILDER_VERSION, "firstboot": FIRSTBOOT, "vagrantfile": BOX_VAGRANTFILE,
                       "disk_gb": DISK_GB}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def ensure_box(cache: Path | None = None, *, force: bool = False, log: Callable[[str], None] = print) -> Path:
    """The cached box file (built first if missing)."""
    release = host_release()
    mirror = os.environ.get("TESTBED_VM_MIRROR") or apt_mirror(release)
    cache = (cache or default_cache_dir()) / "box"
    key = box_key(release, mirror)
    final = cache / key / BOX_FILE
    with _locked(cache):
        if final.is_file() and not force:
            return final
        if os.geteuid() != 0:
            raise VmError("building the Vagrant box needs root (debootstrap, chroot, a loop mount)")
        for tool in ("debootstrap", "extlinux", "qemu-img", "mkfs.ext4", "losetup", "ssh-keygen"):
            if shutil.which(tool) is None:
                raise VmError(f"building the Vagrant box needs {tool} (apt-get install debootstrap extlinux "
                              "qemu-utils e2fsprogs mount openssh-client)")
        work = Path(tempfile.mkdtemp(prefix=f"{key}.build-", dir=cache))
        try:
            _build(release, mirror, work, log)
            shutil.rmtree(final.parent, ignore_errors=True)
            final.parent.mkdir(parents=True)
            os.replace(work / BOX_FILE, final)
        finally:
            _remove_build(work)
        for stale in cache.iterdir():
            if stale.is_dir() and stale != final.parent:
                log(f"box: removing the stale box {stale}")
                _remove_build(stale)
        return final


def _build(release: str, mirror: str, work: Path, log: Callable[[str], None]) -> None:
    t0 = time.monotonic()
    rootfs = work / "rootfs"
    log(f"box: debootstrap {release} from {mirror} ({len(BOX_PACKAGES)} packages besides minbase), a few minutes")
    _run(["debootstrap", "--variant=minbase", f"--include={','.join(BOX_PACKAGES)}", release, str(rootfs), mirror],
         "debootstrap", timeout_s=2400)
    if mounts_under(rootfs):
        raise VmError(f"debootstrap left {', '.join(mounts_under(rootfs))} mounted")
    kver = _configure(rootfs, mirror, release, work)
    raw, img = work / "disk.raw", work / "box.img"
    log(f"box: ext4 image ({DISK_GB} GB sparse) with EXTLINUX, kernel {kver}")
    with open(raw, "wb") as fh:
        fh.truncate(DISK_GB * 2**30)
    # ^64bit: EXTLINUX (syslinux 6.04) reads only 32-bit ext4
    _run(["mkfs.ext4", "-q", "-F", "-L", "root", "-O", "^64bit,^metadata_csum", "-E", "root_owner=0:0",
          "-d", str(rootfs), str(raw)], "mkfs.ext4", timeout_s=1200)
    shutil.rmtree(rootfs)
    _install_extlinux(raw, work / "mnt")
    _run(["qemu-img", "convert", "-O", "qcow2", str(raw), str(img)], "qemu-img convert", timeout_s=1200)
    raw.unlink()
    (work / "metadata.json").write_text(json.dumps({"provider": "libvirt", "format": "qcow2",
                                                    "virtual_size": DISK_GB}) + "\n")
    (work / "Vagrantfile").write_text(BOX_VAGRANTFILE)
    with tarfile.open(work / BOX_FILE, "w") as tar:  # uncompressed: gzip of a GB costs minutes, saves little
        for name in ("metadata.json", "Vagrantfile", "vagrant_key", "box.img"):
            tar.add(work / name, arcname=name)
    log(f"box: built in {time.monotonic() - t0:.0f} s: {work / BOX_FILE} "
        f"({(work / BOX_FILE).stat().st_size / 2**20:.0f} MiB)")


def mounts_under(path: Path) -> list[str]:
    """Mount points at or below ``path`` (deepest first): what an interrupted debootstrap left mounted."""
    base = os.path.realpath(path)
    found = []
    with open("/proc/self/mounts") as fh:
        for line in fh:
            point = line.split()[1].replace("\\040", " ")
            if point == base or point.startswith(base + "/"):
                found.append(point)
    return sorted(found, key=len, reverse=True)


def _remove_build(work: Path) -> None:
    """Unmount what is mounted inside the build (proc, sys, a loop mount), then remove it; never
    remove through a mount point (a bind-mounted /dev would lose the host's device nodes)."""
    for point in mounts_under(work):
        subprocess.run(["umount", "-l", point], capture_output=True)
    left = mounts_under(work)
    if left:
        raise VmError(f"still mounted after the box build, left in place: {', '.join(left)}")
    shutil.rmtree(work, ignore_errors=True)


def _chroot(rootfs: Path, *argv: str) -> None:
    _run(["chroot", str(rootfs), *argv], f"in the box root: {' '.join(argv)}")


def _configure(rootfs: Path, mirror: str, release: str, work: Path) -> str:
    """Users, SSH, network, boot files; returns the kernel release."""
    kernels = sorted(p.name[len("vmlinuz-"):] for p in (rootfs / "boot").glob("vmlinuz-*"))
    if len(kernels) != 1 or not (rootfs / "boot" / f"initrd.img-{kernels[0]}").is_file():
        raise VmError(f"expected one kernel and its initrd in the box root, found {kernels}")
    kver = kernels[0]
    (rootfs / "etc" / "hostname").write_text("testbed-box\n")
    (rootfs / "etc" / "hosts").write_text("127.0.0.1 localhost\n127.0.1.1 testbed-box\n")
    (rootfs / "etc" / "fstab").write_text("/dev/vda / ext4 errors=remount-ro 0 1\n")
    (rootfs / "etc" / "apt" / "sources.list").write_text(
        f"deb {mirror} {release} main\ndeb {mirror} {release}-updates main\n"
        f"deb http://deb.debian.org/debian-security {release}-security main\n")
    (rootfs / "etc" / "network" / "interfaces").write_text(
        "auto lo\niface lo inet loopback\n\nallow-hotplug eth0\niface eth0 inet dhcp\n")
    (rootfs / "etc" / "ssh" / "sshd_config.d").mkdir(parents=True, exist_ok=True)
    (rootfs / "etc" / "ssh" / "sshd_config.d" / "testbed-box.conf").write_text("UseDNS no\n")
    for key in (rootfs / "etc" / "ssh").glob("ssh_host_*"):
        key.unlink()  # every VM makes its own (first boot)
    unit = rootfs / "etc" / "systemd" / "system" / "testbed-firstboot.service"
    unit.write_text(FIRSTBOOT)
    wants = rootfs / "etc" / "systemd" / "system" / "multi-user.target.wants"
    wants.mkdir(parents=True, exist_ok=True)
    (wants / unit.name).symlink_to(f"/etc/systemd/system/{unit.name}")
    _chroot(rootfs, "useradd", "--create-home", "--shell", "/bin/bash", "--groups", "sudo", "vagrant")
    _chroot(rootfs, "passwd", "--lock", "root")
    (rootfs / "etc" / "sudoers.d" / "vagrant").write_text("vagrant ALL=(ALL) NOPASSWD:ALL\nDefaults:vagrant !requiretty\n")
    (rootfs / "etc" / "sudoers.d" / "vagrant").chmod(0o440)
    _run(["ssh-keygen", "-q", "-t", "rsa", "-b", "3072", "-m", "PEM", "-N", "", "-C", "testbed-box",
          "-f", str(work / "vagrant_key")], "ssh-keygen")
    ssh = rootfs / "home" / "vagrant" / ".ssh"
    ssh.mkdir(mode=0o700)
    shutil.copyfile(work / "vagrant_key.pub", ssh / "authorized_keys")
    (ssh / "authorized_keys").chmod(0o600)
    _chroot(rootfs, "chown", "-R", "vagrant:vagrant", "/home/vagrant/.ssh")
    boot = rootfs / "boot" / "extlinux"
    boot.mkdir(parents=True)
    (boot / "extlinux.conf").write_text(
        "DEFAULT debian\nTIMEOUT 1\nPROMPT 0\n\nLABEL debian\n"
        f"  LINUX /boot/vmlinuz-{kver}\n  INITRD /boot/initrd.img-{kver}\n  APPEND {KERNEL_CMDLINE}\n")
    for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
        shutil.rmtree(rootfs / junk, ignore_errors=True)
        (rootfs / junk).mkdir(parents=True, exist_ok=True)
    (rootfs / "var" / "cache" / "apt" / "archives" / "partial").mkdir(exist_ok=True)
    return kver


def _install_extlinux(raw: Path, mnt: Path) -> None:
    """EXTLINUX in the first sector of the whole-disk ext4 (the BIOS boots it as the MBR)."""
    mnt.mkdir()
    loop = _run(["losetup", "--show", "-f", str(raw)], "losetup").stdout.strip()
    try:
        _run(["mount", loop, str(mnt)], "mount the box image")
        try:
            _run(["extlinux", "--install", str(mnt / "boot" / "extlinux")], "extlinux --install")
        finally:
            _run(["umount", str(mnt)], "umount the box image")
    finally:
        subprocess.run(["losetup", "-d", loop], capture_output=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m testbed.vm.box", description=__doc__.split("\n\n")[0])
    p.add_argument("--force", action="store_true", help="build again even if the cached box is current")
    args = p.parse_args(argv)
    try:
        path = ensure_box(force=args.force, log=lambda m: print(m, file=sys.stderr, flush=True))
    except VmError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
