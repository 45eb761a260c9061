"""Ctrl-C and SIGTERM end a run at once, but never cut its teardown short.

:func:`handling_signals` (the CLI installs it for the whole command) turns the *first* SIGINT into
``KeyboardInterrupt`` and the first SIGTERM into ``SystemExit(143)``, so every context manager tears
down what it built. Every later SIGINT/SIGTERM is noted and deferred: a second or third Ctrl-C while
the network is being removed does not abort the removal (SIGKILL still does; ``testbed clean``
removes what the state file lists).

:func:`critical` marks a short stretch that must not be cut in the middle (create a resource and
remember it; tear down): signals that arrive inside are deferred and the first one is raised when
the block ends (unless the command is already unwinding from an earlier one). Outside the CLI
(library use, tests) :func:`critical` installs the deferring handlers for the block itself.

Handlers run in the main thread only (Python's rule), so both are no-ops in other threads. A forked
child (pyroute2 forks helpers; ``subprocess`` runs ``preexec_fn`` after fork) that receives a signal
exits at once instead of running the parent's ``finally`` blocks.

:class:`OpenClose` is the one ``with`` idiom of everything that owns live resources (substrates,
model exchanges, cap enforcers): entering opens, an open that fails part-way is closed again before
its exception goes on, and leaving closes.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from contextlib import contextmanager
from typing import Iterator, Self

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class _Policy:
    def __init__(self) -> None:
        self.main_pid = os.getpid()
        self.installed = False   # handling_signals() is active
        self.unwinding = False   # a signal has been raised: the command is ending
        self.depth = 0           # nesting of critical()
        self.pending: list[int] = []
        self.noted = False


_P = _Policy()


def _raise_for(signum: int) -> None:
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise SystemExit(128 + signum)


def _note(signum: int) -> None:
    if _P.noted:
        return
    _P.noted = True
    try:
        os.write(2, f"testbed: {signal.Signals(signum).name} received while tearing down; finishing the teardown "
                    "first (SIGKILL would leave the rest for `testbed clean`)\n".encode())
    except OSError:
        pass


_CALLBACK_FRAMES = {("_weakrefset.py", "_remove"), ("weakref.py", "remove"), ("weakref.py", "__call__")}
_CALLBACK_DEPTH = 4


def _in_unraisable_code(frame) -> bool:
    """Whether Python is running a finaliser or a weakref callback (the garbage collector calls them
    at any point): an exception raised there is printed as "Exception ignored" and lost."""
    for _ in range(_CALLBACK_DEPTH):
        if frame is None:
            return False
        code = frame.f_code
        if code.co_name == "__del__" or (os.path.basename(code.co_filename), code.co_name) in _CALLBACK_FRAMES:
            return True
        frame = frame.f_back
    return False


def _handler(signum: int, frame) -> None:
    if os.getpid() != _P.main_pid:  # a forked helper must not run the parent's finally blocks
        os._exit(128 + signum)
    if _P.depth > 0 or _P.unwinding:
        _P.pending.append(signum)
        if _P.unwinding:
            _note(signum)
        return
    if _in_unraisable_code(frame):  # raised here it would be lost: deliver it again, after the callback
        os.kill(os.getpid(), signum)
        return
    _P.unwinding = True
    _raise_for(signum)


def _on_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _install() -> dict[int, object]:
    previous = {s: signal.getsignal(s) for s in SIGNALS}
    for s in SIGNALS:
        signal.signal(s, _handler)
    return previous


def _restore(previous: dict[int, object]) -> None:
    for s, h in previous.items():
        signal.signal(s, h if h is not None else signal.SIG_DFL)


@contextmanager
def handling_signals(*, exiting: bool = False) -> Iterator[None]:
    """For a whole command: first SIGINT/SIGTERM raise, later ones are deferred (see module doc).
    ``exiting``: the process exits right after the command (the console entry point); if a signal
    ended the command, further SIGINT/SIGTERM are then ignored instead of restored (see
    :func:`ignore_late_signals`)."""
    if not _on_main_thread() or _P.installed:
        yield
        return
    _P.main_pid = os.getpid()
    _P.unwinding, _P.pending, _P.noted = False, [], False
    previous = _install()
    _P.installed = True
    try:
        yield
    finally:
        _P.installed = False
        if exiting and _P.unwinding:
            ignore_late_signals()
        else:
            _restore(previous)
        _P.pending, _P.noted = [], False


def ignore_late_signals() -> None:
    """For a process about to exit after a signal ended its command (the console entry point):
    ignore further SIGINT/SIGTERM. Python's finalization resets handlers it ran to the default
    action, so a late Ctrl-C would turn exit status 130 into a death by SIGINT (an ignored signal
    stays ignored). In-process callers of the CLI (tests, notebooks) keep their handlers."""
    if _on_main_thread():
        for s in SIGNALS:
            signal.signal(s, signal.SIG_IGN)


@contextmanager
def critical() -> Iterator[None]:
    """Defer SIGINT/SIGTERM for the block; raise the first deferred one when it ends (if the command
    is not already unwinding). Nestable; a no-op outside the main thread."""
    if not _on_main_thread():
        yield
        return
    previous = None
    if not _P.installed and _P.depth == 0:
        _P.main_pid = os.getpid()
        previous = _install()
    _P.depth += 1
    try:
        yield
    finally:
        _P.depth -= 1
        if previous is not None:
            _restore(previous)
        if _P.depth == 0 and _P.pending:
            signum = _P.pending[0]
            if not _P.unwinding:
                _P.pending.clear()
                if _P.installed:
                    _P.unwinding = True
                    _raise_for(signum)
                else:
                    _deliver(signum, previous)
            elif not _P.installed:
                _P.pending.clear()


def _deliver(signum: int, previous: dict[int, object] | None) -> None:
    """Outside the CLI: hand a deferred signal to whatever handled it before the block."""
    handler = (previous or {}).get(signum, signal.SIG_DFL)
    if handler is signal.SIG_IGN:
        return
    if callable(handler):
        handler(signum, sys._getframe(1))
        return
    signal.raise_signal(signum)  # SIG_DFL: the default action (SIGTERM ends the process)


def unwinding() -> bool:
    """A SIGINT/SIGTERM has been raised in this command: it is tearing down."""
    return _P.unwinding


class OpenClose:
    """``with obj:`` calls ``obj.open()``; if that raises (anything, Ctrl-C included) it calls
    ``obj.close()`` and re-raises, so a half-built object is torn down; leaving the block calls
    ``obj.close()``. ``close`` must therefore be idempotent and cope with a partial ``open``. Both
    default to doing nothing: a class overrides what it owns."""

    def open(self) -> None:  # noqa: B027 (optional hook)
        """Acquire what this object owns; nothing by default."""

    def close(self) -> None:  # noqa: B027 (optional hook)
        """Release what this object owns (idempotent); nothing by default."""

    def __enter__(self) -> Self:
        try:
            self.open()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
