"""What every probe shares: the context it runs in, its spec, the one registry of probes, kernel config,
and ``which``."""

from __future__ import annotations

import gzip
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from testbed.registry import Registry

Result = tuple[bool, str, dict[str, Any]]
"""What a probe function returns: (available, detail, measured)."""

_SBIN = ("/usr/local/sbin", "/usr/sbin", "/sbin")


@dataclass
class ProbeContext:
    run_id: str
    is_root: bool
    root_probes: bool = True
    _kconfig: dict[str, str] | None = field(default=None, repr=False)

    def kconfig(self) -> dict[str, str]:
        """``/proc/config.gz`` as {option: value} ("n" for "is not set"); {} if unreadable."""
        if self._kconfig is None:
            self._kconfig = read_kconfig()
        return self._kconfig


@dataclass(frozen=True)
class ProbeSpec:
    name: str
    fn: Callable[[ProbeContext], Result]
    yes: str  # what having it means for a scenario
    no: str  # what its absence means
    needs_root: bool = False
    timeout_s: float = 5.0
    hint: Callable[[ProbeContext], str] | None = None  # added to "needs root" when skipped


PROBES: Registry[ProbeSpec] = Registry("doctor probe")
"""Every probe by name, in the order ``testbed doctor`` lists them (the order they registered:
:mod:`testbed.doctor.probes`, then :mod:`testbed.doctor.probes_host`, then plug-ins). A probe is one
function registered in its own file with ``@probe(...)`` or :func:`register_probe`."""


def register_probe(spec: ProbeSpec) -> ProbeSpec:
    return PROBES.add(spec.name, spec)


def probe(name: str, *, yes: str, no: str, needs_root: bool = False, timeout_s: float = 5.0, hint=None):
    """Function decorator: register the decorated ``(ProbeContext) -> Result`` as probe ``name``."""

    def register(fn):
        register_probe(ProbeSpec(name, fn, yes, no, needs_root, timeout_s, hint))
        return fn

    return register


def read_kconfig(path: Path = Path("/proc/config.gz")) -> dict[str, str]:
    try:
        text = gzip.decompress(path.read_bytes()).decode(errors="replace")
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        if line.startswith("CONFIG_") and "=" in line:
            key, value = line.split("=", 1)
            out[key] = value
        elif line.startswith("# CONFIG_") and line.endswith(" is not set"):
            out[line[2:-len(" is not set")]] = "n"
    return out


def kconfig_text(ctx: ProbeContext, option: str) -> str:
    config = ctx.kconfig()
    if not config:
        return "kernel config unreadable (/proc/config.gz)"
    value = config.get(option)
    if value is None:
        return f"{option} absent from kernel config"
    return f"{option} is not set" if value == "n" else f"{option}={value}"


def which(cmd: str) -> str | None:
    """``cmd`` on PATH, or in the sbin directories a non-root PATH often lacks."""
    return shutil.which(cmd) or shutil.which(cmd, path=os.pathsep.join(_SBIN))


def tool_probe(cmd: str) -> Callable[[ProbeContext], Result]:
    """A probe that only looks for ``cmd``."""

    def fn(ctx: ProbeContext) -> Result:
        path = which(cmd)
        return (True, path, {"path": path}) if path else (False, f"{cmd} not found on PATH or in sbin", {})

    return fn
