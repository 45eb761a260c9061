"""What runs at the sites, and how: the registries ``emulation.nodes`` and ``emulation.runtime`` are
checked against.

Kinds of nodes (:data:`NODE_KINDS`, ``emulation.nodes``):

- ``analytic``: the sim substrate. Nothing runs; every quantity is modelled.
- ``ballast``: a live fabric. Migrations move seeded ballast of the checkpoint's scaled size; no
  training runs.
- ``agents``: a live fabric with a node agent per site. Each agent trains a real PyTorch job, and
  migrations move its real checkpoint.

A live kind (one a scenario's ``emulation.nodes`` may name) is carried by a *mover*
(:mod:`testbed.substrate.emulated.mover`). A new kind registers here from its mover's own file with
``register_node_kind``. Power backends name the kinds they can cap (:mod:`testbed.power.backends`).

Node runtimes (:data:`NODE_RUNTIMES`, ``emulation.runtime``): how the node agent of each site is
started, for the kinds that run one (``site_agents``).

- ``process``: a plain process in the site's network namespace (the default; the only runtime of a
  kind that runs no agent).
- ``docker``: a container per site whose processes live in the site's namespace, on a private Docker
  engine started for the run (:mod:`testbed.substrate.emulated.containers`).

A runtime's entry holds all that testbed asks of it: its launcher (which starts, kills and stops the
sites' agents, :class:`testbed.substrate.emulated.agents.SiteLauncher`), whether it takes
``emulation.image``, why this machine cannot start it (asked before a run), its line in ``testbed
doctor`` and why a sweep's trials using it must not run side by side. A new one is one file: the
launcher and a ``register_node_runtime(NodeRuntime(...))`` call (a plug-in, docs/how-to/plugins.md).

The built-in kinds and runtimes register below, so a scenario validates without importing the
substrates; their hooks are ``"module:attr"`` strings, imported when used
(:func:`testbed.registry.resolve`). This module sits at the bottom of the import order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import AfterValidator, Field

from testbed.registry import Registry, resolve


@dataclass(frozen=True)
class NodeKind:
    name: str
    description: str                      # one line for the schema and the manifest
    live: bool = True                     # runs on a live fabric: ``emulation.nodes`` may name it
    requires_modules: tuple[str, ...] = ()  # Python modules a run on these nodes needs (``auto`` checks them)
    site_agents: bool = False             # runs a node agent per site: every node runtime applies (else only
                                          # the runtimes that need no agent: ``process``)


NODE_KINDS: Registry[NodeKind] = Registry("kind of nodes")


Hook = str | Callable[..., Any]  # a callable, or the "module:attr" that names one (imported when first used)


@dataclass(frozen=True)
class NodeRuntime:
    name: str
    description: str                        # one line for the schema and the docs
    launcher: Hook                          # (AgentPool) -> SiteLauncher (testbed.substrate.emulated.agents)
    needs_agents: bool = True               # applies only to kinds of nodes that run an agent per site
    images: bool = False                    # takes emulation.image / emulation.site_images (containers)
    unavailable: Hook | None = None         # (scenario) -> why this machine cannot start it, or None
    doctor: Hook | None = None              # (capabilities) -> (capabilities it needs, what it is when usable):
                                            # its line under "Substrates:" in `testbed doctor`
    one_at_a_time: str | None = None        # why a sweep's trials using it must not run side by side

    def hook(self, field: str) -> Any:
        """The callable stored in ``field`` (imported now if it was given by name); None if unset."""
        ref = getattr(self, field)
        return None if ref is None else resolve(ref)


NODE_RUNTIMES: Registry[NodeRuntime] = Registry("node runtime")
DEFAULT_RUNTIME = "process"


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


def register_node_runtime(runtime: NodeRuntime) -> NodeRuntime:
    return NODE_RUNTIMES.add(runtime.name, runtime)


def runtimes_for(name: str) -> tuple[str, ...]:
    """The runtimes kind ``name`` runs under: every one where it runs an agent per site, else those that
    need no agent."""
    agents = NODE_KINDS.get(name).site_agents
    return tuple(rt for rt, entry in NODE_RUNTIMES.items() if agents or not entry.needs_agents)


def check_runtime(name: str, runtime: str) -> None:
    """The spec's check that kind ``name`` runs under ``emulation.runtime``: a runtime is how a
    kind's processes run at the sites, so a kind that runs nothing there takes only ``process``."""
    fits = runtimes_for(name)
    if runtime not in fits:
        raise ValueError(f"runtime {runtime!r} does not apply to nodes {name!r}: it says how node agents run at "
                         f"the sites, and {name} runs none there (runtimes for {name}: {', '.join(fits)})")


def schema_choices(schema: dict) -> None:
    """``json_schema_extra`` of ``emulation.nodes``: the live kinds registered when the schema is made."""
    schema["enum"] = list(live_names())


def check_runtime_name(name: str) -> str:
    """The spec's field check of ``emulation.runtime``: a registered node runtime."""
    if name not in NODE_RUNTIMES:
        from testbed.suggest import did_you_mean

        known = NODE_RUNTIMES.names()
        raise ValueError(f"unknown node runtime {name!r}{did_you_mean(str(name), known)} (known: {', '.join(known)})")
    return name


def _runtime_schema(schema: dict) -> None:
    schema["enum"] = list(NODE_RUNTIMES.names())


RuntimeName = Annotated[str, AfterValidator(check_runtime_name), Field(json_schema_extra=_runtime_schema)]
"""A field type: the name of a registered node runtime (``emulation.runtime``), checked when validated
(with a "did you mean") and listed in the JSON schema as the runtimes registered when it is made."""


register_node_kind(NodeKind("analytic", "the sim substrate: nothing runs, every quantity is modelled", live=False))
register_node_kind(NodeKind(
    "ballast", "migrations move seeded ballast of the checkpoint's scaled size; no training runs"))
register_node_kind(NodeKind(
    "agents", "a node agent per site trains a real PyTorch job and migrations move its real checkpoint "
    "(+ ballast)", requires_modules=("torch",), site_agents=True))

register_node_runtime(NodeRuntime(
    DEFAULT_RUNTIME, "a plain process in the site's network namespace",
    launcher="testbed.substrate.emulated.agents:ProcessLauncher", needs_agents=False))
register_node_runtime(NodeRuntime(
    "docker", "a container per site (its processes in the site's namespace) on a private Docker engine for the run",
    launcher="testbed.substrate.emulated.containers:DockerLauncher", images=True,
    unavailable="testbed.substrate.emulated.containers:docker_unavailable",
    doctor="testbed.substrate.emulated.containers:docker_doctor",
    one_at_a_time="one private Docker engine at a time uses the image cache"))
