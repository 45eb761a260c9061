"""Typed errors shared by every layer.

Every error a user can cause carries the *place* it came from (a field path such as
``links[3].bandwidth_gbps`` or a file name) so the CLI can print one line per problem.
"""

from __future__ import annotations


class TestbedError(Exception):
    """Base class of every error testbed raises on purpose."""

    exit_code = 1


class SpecError(TestbedError):
    """A scenario (or a file it names) is invalid. ``problems`` holds ``(where, message)`` pairs."""

    exit_code = 2

    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = list(problems)
        super().__init__("; ".join(f"{where}: {msg}" for where, msg in self.problems))

    def lines(self) -> list[str]:
        return [f"{where}: {msg}" for where, msg in self.problems]

    def in_file(self, path: str) -> "SpecError":
        """The same problems, each naming ``path`` first (``FILE: field.path: message``); problems
        that already name it, and command-line flags (``--seed``), are left as they are."""
        import os

        path = str(path)
        forms = {path, os.path.normpath(path)}

        def named(where: str) -> str:
            if where.startswith("--") or any(where == f or where.startswith((f"{f}:", f"{f} ")) for f in forms):
                return where
            return f"{path}: {where}"

        return SpecError([(named(w), m) for w, m in self.problems])


class TraceError(TestbedError):
    """A trace is malformed (non-monotonic times, NaN, wrong columns, unreadable file)."""

    exit_code = 2

    def __init__(self, where: str, message: str):
        self.where = where
        self.message = message
        super().__init__(f"{where}: {message}")


class TraceRangeError(TestbedError):
    """A trace was asked for a value outside the time range it covers (never extrapolated)."""


class SimulationError(TestbedError):
    """The simulation reached an inconsistent state (a bug, or an impossible scenario)."""


class OutDirError(TestbedError):
    """An output directory (``--out``) testbed may not write or replace (see testbed/recorder/out_dir.py)."""

    exit_code = 2


class TestbedWarning(UserWarning):
    """Something testbed changed or left out on purpose and says so (the CLI prints ``warning: ...``,
    one line; Python shows it as a warning)."""

    __test__ = False  # not a pytest test class, whatever its name
