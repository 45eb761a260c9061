"""Power backends by name: the registry ``power.backend`` is checked against.

A backend is one entry of :data:`BACKENDS`, registered in its own module (one file: its name, the
nodes it can cap, why it refuses the others, and the factory of its cap enforcer,
:mod:`testbed.power.caps`). The built-in ones are the modules :mod:`testbed.power.builtin` imports,
which the scenario model imports (:mod:`testbed.spec.scenario`), so they are registered wherever a
scenario is checked; a plug-in is one file calling :func:`register`. This module sits below the spec
(which checks ``power.backend`` against it), so the scenario's choices (and its JSON schema) come
from the registry, not from a hand-kept list.

Nodes a backend can cap: kinds from :mod:`testbed.node_kinds` (``analytic``, ``ballast``,
``agents``, or a registered one), or :data:`ANY_NODES` for a backend that caps whatever runs.

``auto`` is not a backend but the default choice: the highest-ranked backend with an
``emulation_rank`` that can cap the run's nodes (the agent CPU throttle where agents train, else
the profile model). Every other name is reported as is (``power.parquet: backend``). ``emulated``,
its name before, is read as ``auto`` with a warning.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from testbed.errors import SpecError
from testbed.node_kinds import NODE_KINDS
from testbed.registry import Registry

ANY_NODES = "*"
"""In ``runs_on``: the backend caps every kind of nodes, those registered later included."""
AUTO = "auto"
OLD_NAMES = {"emulated": AUTO}  # an earlier name -> today's, read with a warning


@dataclass(frozen=True)
class PowerBackend:
    name: str
    factory: Callable[[Any], Any]  # PowerSetup -> CapEnforcer (testbed.power.caps)
    runs_on: frozenset[str]        # node kinds it can cap (testbed.node_kinds), or {ANY_NODES}
    refusal: str                   # why not elsewhere, and what to use instead
    description: str = ""
    emulation_rank: int | None = None  # ``emulated`` may choose it (highest rank that runs on the nodes)

    def __post_init__(self) -> None:
        unknown = set(self.runs_on) - set(NODE_KINDS.names()) - {ANY_NODES}
        if not self.runs_on or unknown:
            raise ValueError(f"power backend {self.name!r}: runs_on must be {{{ANY_NODES!r}}} or a non-empty "
                             f"subset of the registered kinds of nodes {NODE_KINDS.names()}")

    def can_cap(self, nodes: str) -> bool:
        return ANY_NODES in self.runs_on or nodes in self.runs_on


BACKENDS: Registry[PowerBackend] = Registry("power backend")


def register(backend: PowerBackend) -> PowerBackend:
    """Add a backend (at its module's import). The same one again is a no-op (a module imported
    twice, e.g. as a test fixture); a different one under a taken name is refused."""
    if backend.name == AUTO or backend.name in OLD_NAMES:
        raise ValueError(f"{backend.name!r} is the default choice, not a power backend name")
    return BACKENDS.add(backend.name, backend)


def names() -> tuple[str, ...]:
    """Every value ``power.backend`` accepts, ``auto`` first."""
    return (AUTO, *BACKENDS.names())


def resolve(name: str, nodes: str) -> PowerBackend:
    """The backend that caps a run whose nodes are ``nodes``; :class:`SpecError` on ``power.backend``
    when the name is unknown or the backend cannot cap such nodes."""
    name = OLD_NAMES.get(name, name)
    if name == AUTO:
        ranked = sorted((b for _, b in BACKENDS.items() if b.emulation_rank is not None and b.can_cap(nodes)),
                        key=lambda b: -b.emulation_rank)  # type: ignore[operator]
        if not ranked:
            raise SpecError([("power.backend", f"no power backend 'auto' may choose can cap {nodes} nodes")])
        return ranked[0]
    if name not in BACKENDS:
        raise SpecError([("power.backend", f"unknown power backend {name!r} (known: {', '.join(names())})")])
    backend = BACKENDS.get(name)
    if not backend.can_cap(nodes):
        raise SpecError([("power.backend", backend.refusal)])
    return backend


def check_name(name: str) -> str:
    """The spec's field check (pydantic validator): a registered name or ``auto`` (``emulated``, its
    name before, becomes ``auto`` with a warning)."""
    if name in OLD_NAMES:
        import warnings

        from testbed.errors import TestbedWarning

        warnings.warn(f"power.backend: {name!r} is now called {OLD_NAMES[name]!r}", TestbedWarning, stacklevel=2)
        return OLD_NAMES[name]
    if name not in names():
        raise ValueError(f"unknown power backend {name!r} (known: {', '.join(names())})")
    return name


def schema_choices(schema: dict) -> None:
    """``json_schema_extra`` of the field: the choices registered when the schema is made."""
    schema["enum"] = list(names())
