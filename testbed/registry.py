"""Named registries: how a policy, a trace kind or a substrate joins the testbed.

A new one registers itself in its own file (``REGISTRY.add(name, thing)``, or as a decorator);
whatever lists them (the scenario's unions and JSON schema, the CLI's choices, the sweep's
choices, the builders) asks the registry instead of keeping a tuple of names. This module sits
at the bottom of the import order (it imports only testbed.errors, lazily). Installed packages join
through the entry point group ``testbed.plugins`` (:func:`load_installed_plugins`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class UnknownNameError(LookupError):
    """A name no entry of the registry carries; ``str()`` is the one-line message."""

    def __init__(self, what: str, name: object, known: tuple[str, ...]):
        self.what, self.name, self.known = what, name, known
        super().__init__(f"unknown {what} {name!r} (known: {', '.join(known) or 'none registered'})")

    def __str__(self) -> str:
        return self.args[0]


class DuplicateNameError(ValueError):
    """Two different entries registered under one name (a programming error, raised at import)."""


class Registry(Generic[T]):
    """Entries by name, in registration order. ``what`` names the concept in messages
    (``unknown policy 'x' (known: a, b)``). Registering the same entry twice under one name is a
    no-op (a module imported twice, e.g. as a test fixture); a different entry is refused.
    Listeners run after each new entry (the scenario model rebuilds its unions); if one raises, the
    entry is taken out again and the error propagates."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._entries: dict[str, T] = {}
        self._listeners: list[Callable[[], None]] = []

    def add(self, name: str, entry: T) -> T:
        if not isinstance(name, str) or not name:
            raise TypeError(f"a {self.what} needs a non-empty string name, got {name!r}")
        old = self._entries.get(name)
        if old is not None:
            if old is entry or old == entry:
                return entry
            raise DuplicateNameError(f"{self.what} {name!r} is registered twice ({old!r} and {entry!r})")
        self._entries[name] = entry
        try:
            self._notify()
        except BaseException:  # a listener refused it (e.g. a union with two members of one name): undo
            del self._entries[name]
            self._notify()
            raise
        return entry

    def _notify(self) -> None:
        for listener in list(self._listeners):
            listener()

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator form of ``add``."""
        def deco(entry: T) -> T:
            return self.add(name, entry)

        return deco

    def get(self, name: str) -> T:
        try:
            return self._entries[name]
        except (KeyError, TypeError):
            raise UnknownNameError(self.what, name, self.names()) from None

    def names(self) -> tuple[str, ...]:
        return tuple(self._entries)

    def items(self) -> tuple[tuple[str, T], ...]:
        return tuple(self._entries.items())

    def discard(self, name: str) -> None:
        """Take an entry out (a test that registered a throwaway one); listeners run as after ``add``.
        An unknown name is a no-op."""
        if self._entries.pop(name, None) is not None:
            self._notify()

    def on_change(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` after every new entry."""
        self._listeners.append(listener)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(self._entries))

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.what!r}: {', '.join(self._entries)})"


def resolve(ref: object) -> object:
    """An entry's hook as given (a callable), or the object a ``"package.module:attr"`` string names,
    imported when first asked for. A registry below the spec stores its built-ins' hooks as such
    strings, so checking a scenario imports none of them (and no module imports upward)."""
    if not isinstance(ref, str):
        return ref
    import importlib

    module, _, attr = ref.partition(":")
    obj: object = importlib.import_module(module)
    for part in filter(None, attr.split(".")):
        obj = getattr(obj, part)
    return obj


PLUGIN_ENTRY_POINT_GROUP = "testbed.plugins"
_installed_loaded = False


def reason(e: BaseException) -> str:
    """``Type: first line`` of an exception (at most 200 characters of it), for one-line messages."""
    first = (str(e).strip().splitlines() or [""])[0][:200]
    return f"{type(e).__name__}: {first}" if first else type(e).__name__


def load_installed_plugins() -> list[str]:
    """Import every entry point of the group ``testbed.plugins`` (each names a module, or an object in
    one, whose import registers what it brings) once per process; returns their names. One that fails
    to import is a warning naming it: the others, and testbed, still work."""
    global _installed_loaded
    if _installed_loaded:
        return []
    _installed_loaded = True
    import warnings
    from importlib.metadata import entry_points

    from testbed.errors import TestbedWarning

    loaded = []
    for ep in sorted(entry_points(group=PLUGIN_ENTRY_POINT_GROUP), key=lambda e: e.name):
        try:
            ep.load()
        except Exception as e:  # noqa: BLE001 - a broken package must not stop testbed
            warnings.warn(f"plug-in {ep.name!r} (entry point {ep.value}, group {PLUGIN_ENTRY_POINT_GROUP}) was not "
                          f"loaded: {reason(e)}", TestbedWarning, stacklevel=2)
            continue
        loaded.append(ep.name)
    return loaded
