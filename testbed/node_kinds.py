"""The kinds of nodes jobs can run on: the registry ``emulation.nodes`` is checked against.

- ``analytic``: the sim substrate. Nothing runs; every quantity is modelled.
- ``ballast``: a live fabric. Migrations move seeded ballast of the checkpoint's scaled size; no
  training runs.
- ``agents``: a live fabric with a node agent per site. Each agent trains a real PyTorch job, and
  migrations move its real checkpoint.

A live kind (one a scenario's ``emulation.nodes`` may name) is carried by a *mover*
(:mod:`testbed.substrate.emulated.mover`). A new kind registers here from its mover's own file with
``register_node_kind``. The built-in kinds register below, so a scenario validates without
importing the substrates. Power backends name the kinds they can cap
(:mod:`testbed.power.backends`). This module sits at the bottom of the import order.
"""

from __future__ import annotations

from dataclasses import dataclass

from testbed.registry import Registry


@dataclass(frozen=True)
class NodeKind:
    name: str
    description: str                      # one line for the schema and the manifest
    live: bool = True                     # runs on a live fabric: ``emulation.nodes`` may name it
    requires_modules: tuple[str, ...] = ()  # Python modules a run on these nodes needs (``auto`` checks them)
    runtimes: tuple[str, ...] = ("process",)  # what ``emulation.runtime`` may be: how its site processes run


NODE_KINDS: Registry[NodeKind] = Registry("kind of nodes")


def register_node_kind(kind: NodeKind) -> NodeKind:
    return NODE_KINDS.add(kind.name, kind)


def live_names() -> tuple[str, ...]:
    """Every value ``emulation.nodes`` accepts."""
    return tuple(name for name, kind in NODE_KINDS.items() if kind.live)


def check_live(name: str) -> str:
    """The spec's field check (pydantic validator): a registered live kind."""
    if name not in live_names():
        raise ValueError(f"unknown kind of nodes {name!r} (known: {', '.join(live_names())})")
    return name


def check_runtime(name: str, runtime: str) -> None:
    """The spec's check that kind ``name`` runs under ``emulation.runtime``: a runtime is how a
    kind's processes run at the sites, so a kind that runs nothing there takes only ``process``."""
    kind = NODE_KINDS.get(name)
    if runtime not in kind.runtimes:
        raise ValueError(f"runtime {runtime!r} does not apply to nodes {name!r}: it says how node agents run at "
                         f"the sites, and {name} runs none there (runtimes for {name}: {', '.join(kind.runtimes)})")


def schema_choices(schema: dict) -> None:
    """``json_schema_extra`` of ``emulation.nodes``: the live kinds registered when the schema is made."""
    schema["enum"] = list(live_names())


register_node_kind(NodeKind("analytic", "the sim substrate: nothing runs, every quantity is modelled", live=False))
register_node_kind(NodeKind(
    "ballast", "migrations move seeded ballast of the checkpoint's scaled size; no training runs"))
register_node_kind(NodeKind(
    "agents", "a node agent per site trains a real PyTorch job and migrations move its real checkpoint "
    "(+ ballast)", requires_modules=("torch",), runtimes=("process", "docker")))
