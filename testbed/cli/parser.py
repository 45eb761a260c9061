"""The one argument-parser class of the CLI: no abbreviated flags, "did you mean" on typos, and
argparse's errors in the CLI's convention (``error: ...`` on stderr, exit 2).

The root parser is a :class:`Parser`; ``add_subparsers`` makes every sub-parser (and theirs) of the
same class (argparse's ``parser_class`` defaults to the parent's class), so no command can forget
``allow_abbrev=False``: ``--fo`` is never taken for ``--force``.
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from testbed.suggest import did_you_mean, suggest

__all__ = ["Parser", "did_you_mean", "suggest"]


class Parser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` with ``allow_abbrev=False`` always, suggestions for mistyped
    commands, choices and flags, and one-line errors."""

    def __init__(self, *args, **kwargs):
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def option_strings(self) -> list[str]:
        return [s for a in self._actions for s in a.option_strings]

    def parse_known_args(self, args=None, namespace=None):
        ns, extras = super().parse_known_args(args, namespace)
        if extras:  # a sub-parser reports its own unknown flags, so it can suggest its own
            self.error(self._unrecognized(extras))
        return ns, extras

    def _unrecognized(self, extras: list[str]) -> str:
        hints = []
        n_flags = sum(t.startswith("-") for t in extras)
        for token in extras:
            flag = token.split("=", 1)[0]
            hits = suggest(flag, self.option_strings()) if flag.startswith("-") and flag not in ("-", "--") else []
            if hits:
                hints.append(f"{flag}: did you mean {' or '.join(hits)}?" if n_flags > 1
                             else f"did you mean {' or '.join(hits)}?")
            elif "=" in token and not token.startswith("-") and "--set" in self.option_strings():
                hints.append(f"to override a field: --set {token}")
        return f"unrecognized arguments: {' '.join(extras)}" + (f" ({'; '.join(hints)})" if hints else "")

    def _check_value(self, action, value):
        if action.choices is not None and value not in action.choices:
            choices = [str(c) for c in action.choices]
            raise argparse.ArgumentError(
                action, f"invalid choice: {value!r}{did_you_mean(str(value), choices)} (choose from {', '.join(choices)})")

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {self.prog}: {message} (see {self.prog} --help)\n")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if message:
            sys.stderr.write(message)
        sys.exit(status)
