"""Start many delay relays fast: one Python process imports the relay once and forks a child per relay.

Starting ``python -m testbed.netem.relay.relay`` costs ~40 ms of CPU (interpreter, site, imports); for
the 100 relays of ``topologies/us-100.yaml`` that is 4 s of CPU, the largest part of bringing the
network up. A fork of a small process that has already imported the relay costs ~1 ms.

How (:func:`start_relays`): the caller becomes a *child subreaper* (``PR_SET_CHILD_SUBREAPER``)
for the moment it takes; it starts ``python -m testbed.netem.relay.relayfork TAG`` and writes the relays'
argument lists to its stdin; the host forks one child per relay (own session, stdin from
/dev/null, stdout+stderr to the relay's log, then :func:`testbed.netem.relay.relay.main`, which enters the
namespace given by ``--netns``), prints each child's PID, and exits. Its children are re-parented
to the caller, which is then their parent exactly as if it had spawned them itself: it reaps them,
gets their exit codes, ends them by PID (:mod:`testbed.processes`). The subreaper flag is
cleared again before returning. ``TAG`` (e.g. the run's temp folder) is in every relay's command
line (a forked child keeps its parent's), so ``testbed clean`` can check that a recorded PID is
still one of ours.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from dataclasses import dataclass

PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37


class RelayStartError(RuntimeError):
    """The relay host failed (could not fork, or died): what it said is in the message."""


@dataclass(frozen=True)
class RelaySpec:
    args: list[str]  # testbed.netem.relay.relay arguments (relay_argv()[3:]: after "python -m testbed.netem.relay.relay")
    log_path: str  # the relay's stdout and stderr


def _prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl({option}): {os.strerror(err)}")


def _is_subreaper() -> bool:
    libc = ctypes.CDLL(None, use_errno=True)
    val = ctypes.c_int(0)
    return libc.prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(val), 0, 0, 0) == 0 and bool(val.value)


def start_relays(specs: list[RelaySpec], tag: str, *, python: str | None = None,
                 on_pid=None) -> list[int]:
    """Start one relay per spec; returns their PIDs (our children once this returns), in order.

    ``on_pid(pid)`` is called for each PID as soon as it is known (to record it). Raises
    :class:`RelayStartError` when not every relay could be started; the PIDs started so far have
    been passed to ``on_pid`` (the caller ends them)."""
    if not specs:
        return []
    was_subreaper = _is_subreaper()
    if not was_subreaper:
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
    pids: list[int] = []
    try:
        host = subprocess.Popen([python or sys.executable, "-m", "testbed.netem.relay.relayfork", tag],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
        try:
            with host.stdin:
                host.stdin.write(json.dumps([{"args": s.args, "log": s.log_path} for s in specs]).encode())
        except BrokenPipeError:
            pass  # the host died at once: its stderr says why
        for line in host.stdout:
            pid = int(line)
            pids.append(pid)
            if on_pid is not None:
                on_pid(pid)
        err = host.stderr.read().decode(errors="replace").strip()
        host.stdout.close()
        host.stderr.close()
        rc = host.wait()  # when it has exited, its children are ours
    finally:
        if not was_subreaper:
            _prctl(PR_SET_CHILD_SUBREAPER, 0)
    if rc != 0 or len(pids) != len(specs):
        raise RelayStartError(f"relay host exited with {rc} after starting {len(pids)} of {len(specs)} relays"
                              + (f": {err.splitlines()[-1]}" if err else ""))
    return pids


def _child(args: list[str], log_path: str) -> int:
    """In the forked child: own session, standard streams to the log, run the relay."""
    os.setsid()
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    null = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    os.dup2(null, 0)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    os.close(null)
    from testbed.netem.relay.relay import main as relay_main

    try:
        return relay_main(args)
    except SystemExit as e:  # argparse errors
        return e.code if isinstance(e.code, int) else 2


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m testbed.netem.relay.relayfork TAG < relays.json", file=sys.stderr)
        return 2
    import testbed.netem.relay.relay  # noqa: F401 (imported once here, shared by every fork)
    import testbed.netem.nsexec  # noqa: F401

    specs = json.loads(sys.stdin.buffer.read() or b"[]")
    for spec in specs:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = _child([str(a) for a in spec["args"]], str(spec["log"]))
            except BaseException:  # noqa: BLE001 (reported in the relay's log, then exit 1)
                import traceback

                traceback.print_exc()
            finally:
                try:
                    sys.stdout.flush()
                    sys.stderr.flush()
                finally:
                    os._exit(code)
        print(pid, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
