"""The ``testbed`` command line: one module per sub-command, each exposing ``register(subparsers)``."""

from __future__ import annotations

import argparse
import sys

from testbed import __version__
from testbed.errors import SpecError, TestbedError

# Sub-command modules, in the order ``testbed --help`` lists them.
_COMMANDS = ("run", "sweep", "report", "compare", "validate", "schema", "feasibility", "net", "clean", "bench", "calibrate", "doctor", "vm")


def build_parser() -> argparse.ArgumentParser:
    import importlib

    from testbed.cli.parser import Parser

    parser = Parser(
        prog="testbed",
        description="Trace-replay emulation testbed for geo-distributed, renewable- and power-aware ML training.",
    )
    parser.add_argument("--version", action="version", version=f"testbed {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in _COMMANDS:
        module = importlib.import_module(f"testbed.cli.cmd_{name}")
        module.register(sub)
    return parser


def _os_error(e: OSError) -> str:
    what = e.strerror or str(e) or type(e).__name__
    return f"{e.filename}: {what}" if e.filename is not None else what


def main(argv: list[str] | None = None, *, exiting: bool = False) -> int:
    """The first SIGINT/SIGTERM raises (KeyboardInterrupt / SystemExit(143)) so that every context
    manager tears down; later ones wait for the teardown (:mod:`testbed.lifecycle`). testbed's own
    warnings are ``warning: ...`` lines on stderr (:mod:`testbed.cli.streams`)."""
    from testbed.cli.streams import warning_lines
    from testbed.lifecycle import handling_signals

    with handling_signals(exiting=exiting), warning_lines():
        return _main(argv)


def console() -> None:
    """The ``testbed`` executable (and ``python -m testbed``): :func:`main`, then exit with its code.
    Output a reader did not wait for (``testbed schema | head``) is dropped quietly, as ``cat`` does."""
    from testbed.cli.streams import flush_stdout

    code = main(exiting=True)
    flush_stdout()  # here, not at interpreter exit: a closed pipe would print a traceback there
    sys.exit(code)


def _main(argv: list[str] | None) -> int:
    from testbed.registry import load_installed_plugins

    try:
        load_installed_plugins()  # installed plug-ins (entry points testbed.plugins) are choices like built-ins
        parser = build_parser()
        try:
            args = parser.parse_args(argv)
        except SystemExit as e:  # --help, --version, or a usage error already reported (exit 2)
            return e.code if isinstance(e.code, int) else 2
        return int(args.func(args) or 0)
    except SpecError as e:
        for line in e.lines():  # one convention for every command: `error: ...` on stderr
            print(f"error: {line}", file=sys.stderr)
        return e.exit_code
    except TestbedError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    except OSError as e:  # the machine refused (a full disk, a permission, a vanished file): a failed run
        from testbed.cli.streams import silence_stdout, stdout_closed

        if isinstance(e, BrokenPipeError) and stdout_closed():  # the reader stopped early (`| head`): no error
            silence_stdout()
            return 0
        print(f"error: {_os_error(e)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    console()
