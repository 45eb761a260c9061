"""The one argument-parser class of the CLI: no abbreviated flags, "did you mean" on typos, and
argparse's errors in the CLI's convention (``error: ...`` on stderr, exit 2).

The root parser is a :class:`Parser`; ``add_subparsers`` makes every sub-parser (and theirs) of the
same class (argparse's ``parser_class`` defaults to the parent's class), so no command can forget
``allow_abbrev=False``: ``--fo`` is never taken for ``--force``.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from typing import Iterable, NoReturn


def suggest(word: str, known: Iterable[str]) -> list[str]:
    """Known words ``word`` is probably a typo or a prefix of: prefix matches first, then close ones."""
    known = sorted({str(k) for k in known})
    prefix = [k for k in known if len(word) >= 2 and k.startswith(word) and k != word]
    close = difflib.get_close_matches(word, known, n=3, cutoff=0.6)
    out: list[str] = []
    for k in prefix + close:
        if k not in out:
            out.append(k)
    return out[:3]


def did_you_mean(word: str, known: Iterable[str]) -> str:
    hits = suggest(word, known)
    return f" (did you mean {' or '.join(hits)}?)" if hits else ""


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
