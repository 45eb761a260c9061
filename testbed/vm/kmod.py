"""Kernel modules of an unpacked ``linux-image-*`` package: find them by name and close over
their dependencies (read from each ``.ko``'s ``.modinfo`` strings, so no ``depmod`` is needed
on the host). Pure file reading; testable without root.
"""

from __future__ import annotations

import re
from pathlib import Path

_DEPENDS = re.compile(rb"(?:^|\0)depends=([^\0]*)\0")


def canonical(name: str) -> str:
    """Module names treat ``-`` and ``_`` alike (``virtio-rng`` is ``virtio_rng``)."""
    return name.replace("-", "_")


def module_name(path: Path) -> str:
    name = path.name
    for suffix in (".ko", ".ko.xz", ".ko.zst", ".ko.gz"):
        if name.endswith(suffix):
            return canonical(name[: -len(suffix)])
    raise ValueError(f"not a kernel module: {path}")


def index(modules_dir: Path) -> dict[str, Path]:
    """``{module name: path}`` for every module under ``modules_dir`` (``lib/modules/<version>``)."""
    found = {}
    for path in sorted(modules_dir.rglob("*.ko*")):
        try:
            found[module_name(path)] = path
        except ValueError:
            continue
    return found


def read(path: Path) -> bytes:
    """A module's ELF bytes (newer Debian kernels ship ``.ko.xz``; busybox's insmod wants ``.ko``)."""
    data = path.read_bytes()
    if path.name.endswith(".ko.xz"):
        import lzma

        return lzma.decompress(data)
    if path.name.endswith(".ko.gz"):
        import gzip

        return gzip.decompress(data)
    if path.name.endswith(".ko"):
        return data
    raise ValueError(f"unsupported module compression (only .ko, .ko.xz, .ko.gz): {path}")


def depends(path: Path) -> list[str]:
    """The modules ``path`` needs loaded first (its ``depends=`` modinfo field)."""
    m = _DEPENDS.search(read(path))
    if m is None or not m.group(1):
        return []
    return [canonical(d) for d in m.group(1).decode().split(",") if d]


def builtin(modules_dir: Path) -> set[str]:
    """Modules compiled into the kernel (``modules.builtin``): wanted, but nothing to load."""
    listing = modules_dir / "modules.builtin"
    if not listing.exists():
        return set()
    return {module_name(Path(line.strip())) for line in listing.read_text().splitlines() if line.strip()}


def load_order(wanted: list[str], available: dict[str, Path], builtin_names: set[str] = frozenset()) -> list[str]:
    """``wanted`` and everything they depend on, each after its dependencies (``insmod`` order).
    A wanted module that is neither a file nor built in is an error: the guest would lack it."""
    order: list[str] = []
    seen: set[str] = set()

    def visit(name: str, chain: tuple[str, ...]) -> None:
        name = canonical(name)
        if name in seen:
            return
        if name in chain:
            raise ValueError(f"module dependency cycle: {' -> '.join((*chain, name))}")
        if name not in available:
            if name in builtin_names:
                seen.add(name)
                return
            raise KeyError(f"kernel module {name!r} not found in the kernel package")
        for dep in depends(available[name]):
            visit(dep, (*chain, name))
        seen.add(name)
        order.append(name)

    for name in wanted:
        visit(name, ())
    return order
