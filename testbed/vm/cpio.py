"""A minimal ``newc`` cpio writer: enough for a Linux initramfs (directories, regular files,
symlinks), so building one needs neither ``cpio`` nor ``find`` on the host. Pure; unit-tested.
"""

from __future__ import annotations

import stat
from dataclasses import dataclass
from typing import BinaryIO

_MAGIC = b"070701"
_TRAILER = "TRAILER!!!"


@dataclass(frozen=True)
class Entry:
    """One archive member: ``path`` relative to the archive root (no leading ``/``)."""

    path: str
    mode: int  # full st_mode: type bits and permissions
    data: bytes = b""  # file contents, or the target of a symlink
    rdev: tuple[int, int] = (0, 0)  # (major, minor) of a device node

    @staticmethod
    def dir(path: str, perm: int = 0o755) -> "Entry":
        return Entry(path, stat.S_IFDIR | perm)

    @staticmethod
    def file(path: str, data: bytes, perm: int = 0o644) -> "Entry":
        return Entry(path, stat.S_IFREG | perm, data)

    @staticmethod
    def chardev(path: str, major: int, minor: int, perm: int = 0o600) -> "Entry":
        return Entry(path, stat.S_IFCHR | perm, rdev=(major, minor))

    @staticmethod
    def symlink(path: str, target: str) -> "Entry":
        return Entry(path, stat.S_IFLNK | 0o777, target.encode())


def _pad(n: int) -> bytes:
    return b"\0" * (-n % 4)


def _header(ino: int, e: Entry, nlink: int, name: bytes) -> bytes:
    # ino mode uid gid nlink mtime filesize devmajor devminor rdevmajor rdevminor namesize check
    fields = [ino, e.mode, 0, 0, nlink, 0, len(e.data), 0, 0, *e.rdev, len(name) + 1, 0]
    return _MAGIC + b"".join(f"{v:08x}".encode() for v in fields)


def write(out: BinaryIO, entries: list[Entry]) -> int:
    """Write ``entries`` (parents before children) and the trailer; returns the bytes written."""
    written = 0
    for ino, e in enumerate([*entries, Entry(_TRAILER, 0)], start=1):
        if e.path.startswith("/") or not e.path:
            raise ValueError(f"archive paths are relative and non-empty: {e.path!r}")
        name = e.path.encode()
        last = e.path == _TRAILER
        head = _header(0 if last else ino, e, 2 if stat.S_ISDIR(e.mode) else 1, name)
        chunk = head + name + b"\0"
        chunk += _pad(len(chunk)) + e.data + _pad(len(e.data))
        out.write(chunk)
        written += len(chunk)
    tail = b"\0" * (-written % 512)  # block-align, as cpio(1) does
    out.write(tail)
    return written + len(tail)
