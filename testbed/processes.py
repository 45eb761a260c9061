"""End processes we started, all at once, by PID (psutil), and know when they are really gone.

Two facts make a naive ``SIGTERM; while alive: sleep`` loop slow or wrong here:

* A process that has exited stays a *zombie* until its parent reaps it. ``kill(pid, 0)`` still
  succeeds on a zombie, so it looks alive. Our own children are reaped by waiting on them; a
  process that is not our child (a relay left by ``testbed net up``, re-parented to an init that
  does not reap) can never be reaped by us: it has ended, and is counted as ended.
* Waiting on N processes one after the other with a timeout each costs up to N timeouts.
  Here every process is signalled first, then all are waited on together (``psutil.wait_procs``,
  which polls a pidfd per process) until one common deadline; only what is left then is SIGKILLed.

psutil's ``Process`` remembers the start time of the PID it was made for, so a signal never
reaches a different process that reused the PID.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import psutil

KILL_WAIT_S = 5.0  # after SIGKILL: a process in uninterruptible sleep may take a moment
_POLL_S = 0.05  # longest pause between two checks of the processes still running


@dataclass
class StopReport:
    """What :func:`stop_processes` did, by PID."""

    terminated: list[int] = field(default_factory=list)  # ended after SIGTERM
    killed: list[int] = field(default_factory=list)  # needed SIGKILL (ignored SIGTERM for timeout_s)
    already_gone: list[int] = field(default_factory=list)  # had ended (or was a zombie) before we signalled
    survivors: list[int] = field(default_factory=list)  # still running even after SIGKILL + KILL_WAIT_S
    returncodes: dict[int, int | None] = field(default_factory=dict)  # None: not our child (status unknown)


def ended(proc: psutil.Process) -> bool:
    """True when ``proc`` has exited: reaped, gone, or a zombie. Reaps it when it is our child.
    Sets ``proc.returncode`` when it returns True (None: not our child, exit status unknown)."""
    try:
        if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
            return False  # is_running: same PID *and* same start time (not a reused PID)
    except psutil.NoSuchProcess:
        pass
    _reap(proc)
    return True


# How long to wait for our own child that shows as a zombie but cannot be reaped yet: a multi-threaded
# process is a zombie once its main thread exits, and waitpid collects it only after its other threads.
OWN_ZOMBIE_REAP_S = 5.0


def _reap(proc: psutil.Process) -> None:
    """Collect an exited process's status if it is our child; nothing to do for others."""
    try:
        ours = proc.ppid() == os.getpid()
    except psutil.Error:
        ours = False
    try:
        # our child: waitpid reaps it, gives its exit code
        proc.returncode = proc.wait(timeout=OWN_ZOMBIE_REAP_S if ours else 0)
    except psutil.TimeoutExpired:  # a zombie of another parent: only that parent can reap it
        proc.returncode = None
    except psutil.NoSuchProcess:
        proc.returncode = getattr(proc, "returncode", None)


def wait_ended(procs: Iterable[psutil.Process], timeout_s: float) -> tuple[list[psutil.Process], list[psutil.Process]]:
    """Wait for all of ``procs`` together until each has ended or ``timeout_s`` passed.

    Returns ``(gone, alive)``; each gone process has a ``returncode`` attribute (None when it was
    not our child). Zombies count as gone at once (see the module doc)."""
    deadline = time.monotonic() + max(timeout_s, 0.0)
    alive = list(procs)
    gone: list[psutil.Process] = []
    while alive:
        still = []
        for p in alive:
            (gone if ended(p) else still).append(p)
        alive = still
        left = deadline - time.monotonic()
        if not alive or left <= 0:
            break
        # children that exit inside this slice are reaped at once (pidfd poll); the slice bounds
        # how long the exit of a process that is not our child (a zombie we cannot reap) goes unseen
        done, alive = psutil.wait_procs(alive, timeout=min(left, _POLL_S))
        gone += done
    return gone, alive


def _signal(procs: list[psutil.Process], how: str) -> tuple[list[psutil.Process], list[psutil.Process]]:
    """Send SIGTERM (``how="terminate"``) or SIGKILL (``"kill"``) to each process.
    Returns ``(signalled, vanished)``: vanished ones had ended in the meantime (reaped if ours)."""
    signalled, vanished = [], []
    for p in procs:
        try:
            getattr(p, how)()  # psutil refuses (NoSuchProcess) when the PID now names another process
        except psutil.NoSuchProcess:
            _reap(p)
            vanished.append(p)
        else:
            signalled.append(p)
    return signalled, vanished


def stop_processes(procs: Iterable[psutil.Process], timeout_s: float = 5.0,
                   kill_wait_s: float = KILL_WAIT_S) -> StopReport:
    """SIGTERM every process, wait for all of them together up to ``timeout_s``, SIGKILL the ones
    still running, wait up to ``kill_wait_s`` more. Exited children are reaped; zombies that are
    not our children count as ended. Never raises for processes that are already gone."""
    rep = StopReport()
    before, running = [], []
    for p in procs:
        (before if ended(p) else running).append(p)
    signalled, vanished = _signal(running, "terminate")
    before += vanished
    gone, alive = wait_ended(signalled, timeout_s)
    killed, vanished = _signal(alive, "kill")
    gone += vanished  # ended between the last look and SIGKILL
    gone_k, survivors = wait_ended(killed, kill_wait_s)
    rep.already_gone = [p.pid for p in before]
    rep.terminated = [p.pid for p in gone]
    rep.killed = [p.pid for p in killed]
    rep.survivors = [p.pid for p in survivors]
    rep.returncodes = {p.pid: getattr(p, "returncode", None) for p in before + gone + gone_k}
    return rep


def stop_popens(popens: Iterable[subprocess.Popen | psutil.Process], timeout_s: float = 5.0,
                kill_wait_s: float = KILL_WAIT_S) -> StopReport:
    """:func:`stop_processes` for children started with ``subprocess`` (``psutil.Process`` objects
    may be mixed in): the ``Popen`` objects learn their exit code (psutil reaps them, so
    ``Popen.poll`` could not)."""
    by_pid: dict[int, subprocess.Popen] = {}
    procs, exited = [], []
    for po in popens:
        if isinstance(po, psutil.Process):
            procs.append(po)
            continue
        if po.returncode is not None:  # reaped before: not ours to report
            continue
        if po.poll() is not None:  # had exited (a zombie until this poll reaped it)
            exited.append(po)
            continue
        try:
            procs.append(psutil.Process(po.pid))
        except psutil.NoSuchProcess:  # reaped behind our back: nothing left to end
            po.poll()
            exited.append(po)
            continue
        by_pid[po.pid] = po
    rep = stop_processes(procs, timeout_s, kill_wait_s)
    rep.already_gone += [po.pid for po in exited]
    rep.returncodes.update({po.pid: po.returncode for po in exited})
    for pid, po in by_pid.items():
        if po.returncode is None and pid not in rep.survivors:
            code = rep.returncodes.get(pid)
            if code is not None:
                po.returncode = code
            else:
                po.poll()  # ECHILD: Popen records 0, the exit status is lost (someone else reaped it)
    return rep


def owned_processes(pids: Iterable[int], marker: str, errors: list[str] | None = None) -> list[psutil.Process]:
    """The processes among ``pids`` that are still running (not zombies) *and* whose command line
    contains ``marker`` (e.g. a run id): after a crash a recorded PID may belong to someone else.
    A zombie's command line is empty; it has ended anyway. A PID that cannot be inspected (access
    denied) is skipped, and reported in ``errors`` when given."""
    out = []
    for pid in pids:
        try:
            p = psutil.Process(int(pid))
            if p.status() == psutil.STATUS_ZOMBIE:
                continue
            if marker in " ".join(p.cmdline()):
                out.append(p)
        except (psutil.NoSuchProcess, ValueError):
            continue
        except psutil.Error as e:
            if errors is not None:
                errors.append(f"process {pid}: {e}")
    return out
