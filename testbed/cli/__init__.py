"""The ``testbed`` command line: one module per sub-command, each exposing ``register(subparsers)``."""

from __future__ import annotations

import argparse
import sys

from testbed import __version__
from testbed.errors import SpecError, TestbedError

# Sub-command modules, in the order ``testbed --help`` lists them.
_COMMANDS = ("run", "sweep", "report", "validate", "schema", "feasibility", "net", "clean", "bench", "calibrate", "doctor", "vm")


def build_parser() -> argparse.ArgumentParser:
    import importlib

    parser = argparse.ArgumentParser(
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


def main(argv: list[str] | None = None) -> int:
    """The first SIGINT/SIGTERM raises (KeyboardInterrupt / SystemExit(143)) so that every context
    manager tears down; later ones wait for the teardown (:mod:`testbed.lifecycle`)."""
    from testbed.lifecycle import handling_signals

    with handling_signals():
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        return int(args.func(args) or 0)
    except SpecError as e:
        for line in e.lines():
            print(line, file=sys.stderr)
        return e.exit_code
    except TestbedError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
