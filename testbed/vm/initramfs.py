"""The guest's boot path: a busybox initramfs that loads the block, filesystem and 9p modules,
mounts the ext4 root and hands over to ``/sbin/tb-guest-init``, which mounts the host's shares,
runs the job the host wrote, and powers the machine off. No systemd, no udev: seconds, not
minutes, under software emulation.
"""

from __future__ import annotations

from pathlib import Path

from testbed.vm import kmod
from testbed.vm.cpio import Entry

# Loaded by the initramfs, in this order after dependency closure (testbed.vm.kmod.load_order).
BOOT_MODULES = ("virtio_pci", "virtio_blk", "virtio_rng", "crc32c_generic", "ext4", "9pnet_virtio", "9p")

# The one folder the host shares (``-virtfs``, writable): the job and its payload come in, the
# results go out.
OUT_TAG, OUT_DIR = "out", "/out"

INIT = r"""#!/bin/busybox sh
# PID 1 of the testbed initramfs: modules, root filesystem, switch_root.
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in $(cat /modules.order); do
  insmod "/lib/modules/$m.ko" || echo "tb-initramfs: insmod $m failed"
done
n=0
while [ ! -b /dev/vda ] && [ $n -lt 200 ]; do sleep 0.05; n=$((n + 1)); done
mkdir -p /newroot
if ! mount -t ext4 -o noatime /dev/vda /newroot; then
  echo "tb-initramfs: cannot mount the root filesystem /dev/vda"
  echo o > /proc/sysrq-trigger
fi
for d in dev proc sys; do mount --move "/$d" "/newroot/$d"; done
exec switch_root /newroot /sbin/tb-guest-init
"""

# Runs as PID 1 of the root filesystem. The job (``/out/job.sh``) is written by the host for each
# boot, so the cached image never changes with what is tested.
GUEST_INIT = r"""#!/bin/sh
# PID 1 of the testbed guest: mount the host's share, run /out/job.sh, power off.
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
HOME=/root
export PATH HOME
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs -o mode=1777 shm /dev/shm
mount -t tmpfs -o mode=755 run /run
mount -t tmpfs -o mode=1777 tmp /tmp
mount -t 9p -o trans=virtio,version=9p2000.L,msize=524288 out /out
hostname tb-guest
ip link set lo up
echo "tb-guest: userspace up at $(cut -d' ' -f1 /proc/uptime) s"
if [ -f /out/job.sh ]; then
  sh /out/job.sh
  echo "tb-guest: job exited with $? at $(cut -d' ' -f1 /proc/uptime) s"
else
  echo "tb-guest: no /out/job.sh"
fi
sync
echo o > /proc/sysrq-trigger
sleep 10
"""


def entries(busybox: Path, modules: list[tuple[str, Path]]) -> list[Entry]:
    """The initramfs: busybox, ``/init``, and ``modules`` (name, path) in load order."""
    out = [Entry.dir(d) for d in ("bin", "sbin", "usr", "usr/bin", "usr/sbin", "dev", "proc", "sys", "lib",
                                  "lib/modules", "newroot")]
    out.append(Entry.chardev("dev/console", 5, 1))
    out.append(Entry.file("bin/busybox", busybox.read_bytes(), 0o755))
    out.append(Entry.symlink("bin/sh", "busybox"))
    out.append(Entry.file("init", INIT.encode(), 0o755))
    out.append(Entry.file("modules.order", "".join(f"{name}\n" for name, _ in modules).encode()))
    out.extend(Entry.file(f"lib/modules/{name}.ko", kmod.read(path)) for name, path in modules)
    return out
