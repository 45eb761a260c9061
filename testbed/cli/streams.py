"""The CLI's output streams: a reader that stops early (``testbed schema | head``) is no error, and
testbed's own warnings are one ``warning: ...`` line on stderr.

A closed pipe reaches Python as ``BrokenPipeError`` (SIGPIPE is ignored) on a write or on the
final flush of stdout. :func:`stdout_closed` tells it apart from a broken pipe elsewhere (a socket,
a child's stdin): the write end of a pipe whose reader has gone polls as an error.
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from typing import Iterator


def stdout_closed() -> bool:
    """Is stdout a pipe (or socket) whose reading end is gone?"""
    import select

    try:
        fd = sys.stdout.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no real file behind stdout (a test's capture)
        return False


def silence_stdout() -> None:
    """Point stdout's file descriptor at /dev/null, so that what is still buffered (and Python's
    flush at exit) goes nowhere instead of failing again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        finally:
            os.close(devnull)
    except (AttributeError, OSError, ValueError):
        pass


def flush_stdout() -> bool:
    """Flush stdout; False (and stdout silenced) if its reader has gone."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        silence_stdout()
        return False
    except (AttributeError, OSError, ValueError):
        pass
    return True


@contextlib.contextmanager
def warning_lines() -> Iterator[None]:
    """Within: a :class:`~testbed.errors.TestbedWarning` is printed as ``warning: MESSAGE`` (one line
    on stderr, never raised, whatever the warning filters say); other warnings as Python shows them."""
    from testbed.errors import TestbedWarning

    with warnings.catch_warnings():
        warnings.simplefilter("default", TestbedWarning)
        shown = warnings.showwarning

        def show(message, category, filename, lineno, file=None, line=None):
            if isinstance(category, type) and issubclass(category, TestbedWarning):
                print(f"warning: {message}", file=sys.stderr)
            else:
                shown(message, category, filename, lineno, file, line)

        warnings.showwarning = show
        yield
