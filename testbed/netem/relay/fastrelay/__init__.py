"""The compiled delay relay (``fastrelay.c``): same semantics and control interface as
:mod:`testbed.netem.relay.relay`, in C, one process for any number of links.

Built by ``scripts/setup.sh`` (``python -m testbed.netem.relay.fastrelay build``) with the system C
compiler into ``build/fastrelay`` next to its source; nothing is downloaded. The fabric prefers it
whenever the built binary is present and not older than its source (:func:`available`); otherwise
it uses the Python relay. ``TESTBED_RELAY=python`` forces the Python relay.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

SOURCE = Path(__file__).resolve().parent / "fastrelay.c"
BINARY = SOURCE.parent / "build" / "fastrelay"
CFLAGS = ["-O2", "-Wall", "-Wextra", "-pthread"]
RELAY_ENV = "TESTBED_RELAY"  # "python": never use the compiled relay (any other value: prefer it when built)


class FastRelayBuildError(RuntimeError):
    """The compiled relay could not be built (no compiler, or it failed): the message says why."""


@dataclass(frozen=True)
class LinkArg:
    """One link served by the compiled relay (impairments per direction, as ``PathImpairment``)."""

    if_a: str
    if_b: str
    delay_ab_ms: float
    jitter_ab_ms: float
    loss_ab_pct: float
    delay_ba_ms: float
    jitter_ba_ms: float
    loss_ba_pct: float
    seed: int = 0
    gso: bool = False
    stats_path: str | None = None
    control_path: str | None = None
    netns: str | None = None  # the namespace of if_a/if_b when not the relay's own (name or path)

    def __post_init__(self) -> None:
        for name in ("stats_path", "control_path", "if_a", "if_b", "netns"):
            value = getattr(self, name)
            if value is not None and "," in value:
                raise ValueError(f"LinkArg.{name} must not contain ',': {value!r}")

    def spec(self) -> str:
        nums = (self.delay_ab_ms, self.jitter_ab_ms, self.loss_ab_pct, self.delay_ba_ms, self.jitter_ba_ms,
                self.loss_ba_pct)
        return ",".join([self.if_a, self.if_b, *(repr(float(x)) for x in nums), str(int(self.seed)),
                         "1" if self.gso else "0", self.stats_path or "", self.control_path or "", self.netns or ""])


def compiler() -> str | None:
    """The C compiler to build with: ``$CC``, else cc or gcc on PATH."""
    cc = os.environ.get("CC")
    if cc:
        return shutil.which(cc)
    return shutil.which("cc") or shutil.which("gcc")


def available(binary: Path | None = None, source: Path | None = None) -> bool:
    """True when the compiled relay is built, executable and not older than its source, and the
    environment does not ask for the Python relay. Defaults: :data:`BINARY`, :data:`SOURCE`, read at
    call time (a test that sets them is obeyed)."""
    binary, source = binary or BINARY, source or SOURCE
    if os.environ.get(RELAY_ENV, "").lower() == "python":
        return False
    try:
        return os.access(binary, os.X_OK) and binary.stat().st_mtime >= source.stat().st_mtime
    except OSError:
        return False


def build(binary: Path | None = None, source: Path | None = None) -> Path:
    """Compile ``source`` into ``binary`` (atomically: a failed build leaves no binary behind)."""
    binary, source = binary or BINARY, source or SOURCE
    cc = compiler()
    if cc is None:
        raise FastRelayBuildError("no C compiler (cc/gcc) on PATH: install build-essential")
    binary.parent.mkdir(parents=True, exist_ok=True)
    tmp = binary.with_name(f".{binary.name}.tmp{os.getpid()}")
    try:
        proc = subprocess.run([cc, *CFLAGS, "-o", str(tmp), str(source), "-lm"], capture_output=True, text=True)
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise FastRelayBuildError(f"{cc} failed on {source.name}: {last}")
        os.replace(tmp, binary)
    finally:
        tmp.unlink(missing_ok=True)
    return binary


def fastrelay_argv(links: list[LinkArg], *, netns: str | None = None, ready_file: str | None = None,
                   ring_mb: int | None = None, rt_prio: int | None = None, binary: Path | None = None) -> list[str]:
    """argv of one compiled relay serving ``links`` (all in one namespace: ``netns``, a name or a
    ``/proc/PID/ns/net`` path, entered by the relay itself). ``ring_mb``: bytes held per direction
    (default 256 MB of address space, touched only as far as frames are held; beyond it frames are
    counted ``dropped_overflow``). ``rt_prio``: SCHED_FIFO priority (0: normal scheduling; default
    :func:`testbed.netem.relay.relaypool.rt_priority`, from ``TESTBED_RELAY_RT_PRIO``)."""
    from testbed.netem.relay.relaypool import rt_priority

    if not links:
        raise ValueError("fastrelay_argv: no links")
    if rt_prio is None:
        rt_prio = rt_priority()
    if isinstance(rt_prio, bool) or not isinstance(rt_prio, int) or not 0 <= rt_prio <= 99:
        raise ValueError(f"fastrelay_argv: rt_prio must be a whole number 0-99, got {rt_prio!r}")
    argv = [str(binary or BINARY)]
    if ring_mb is not None:
        if isinstance(ring_mb, bool) or not isinstance(ring_mb, int) or ring_mb < 1:
            raise ValueError(f"fastrelay_argv: ring_mb must be a whole number >= 1, got {ring_mb!r}")
        argv += ["--ring-mb", str(ring_mb)]
    if netns:
        argv += ["--netns", netns]
    if ready_file:
        argv += ["--ready-file", str(ready_file)]
    if rt_prio:
        argv += ["--rt-prio", str(rt_prio)]
    for link in links:
        argv += ["--link", link.spec()]
    return argv


def spawn(argv: list[str], log_path: str) -> int:
    """Start the relay in its own session, stdin from /dev/null, stdout+stderr to ``log_path``;
    returns its PID (a child of this process: the caller reaps it)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    actions = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
               (os.POSIX_SPAWN_OPEN, 1, log_path, flags, 0o600),
               (os.POSIX_SPAWN_DUP2, 1, 2)]
    return os.posix_spawn(argv[0], argv, os.environ, file_actions=actions, setsid=True)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv != ["build"]:
        print("usage: python -m testbed.netem.relay.fastrelay build", file=sys.stderr)
        return 2
    try:
        path = build()
    except FastRelayBuildError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(path)
    return 0
