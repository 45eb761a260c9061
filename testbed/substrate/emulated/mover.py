"""A mover: what runs on an emulated fabric's sites and carries a migration across it.

The emulated base (:mod:`testbed.substrate.emulated.base`) owns the fabric, the clock and the
link replay; its mover owns what starts, moves, finishes and caps jobs. One mover per live kind of
nodes (``emulation.nodes``, :mod:`testbed.node_kinds`): ``ballast`` (:mod:`.ballast_mover`) or
``agents`` (:mod:`.agent_mover`). A new one is one file:

    register_node_kind(NodeKind("mine", "what runs at the sites"))   # what emulation.nodes accepts
    @register_mover
    class MyMover(Mover):
        nodes = "mine"
        ...
"""

from __future__ import annotations

import re
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass

from testbed.inputs import Inputs
from testbed.node_kinds import NODE_KINDS
from testbed.netem.fabric import Fabric
from testbed.netem.scaling import Scaling
from testbed.power.caps import CapTarget
from testbed.registry import Registry
from testbed.substrate.base import MigrationOrder, MigrationOutcome
from testbed.substrate.emulated.clock import EmulationClock


@dataclass(frozen=True)
class Emulation:
    """The live emulation a mover works in: the fabric (up), its scaling, the clock (made, started
    once the mover is ready), the run's transfer token and the event that cancels transfers."""

    inputs: Inputs
    fabric: Fabric
    scaling: Scaling
    clock: EmulationClock
    token: str
    cancel: threading.Event


class Mover(ABC):
    """Starts what runs at the sites, moves a job's checkpoint, finishes jobs, offers caps."""

    nodes: str  # the kind of nodes jobs run on (the CapTarget's), as in emulation.nodes

    def __init__(self, inputs: Inputs):
        self._in = inputs

    @abstractmethod
    def start(self, em: Emulation) -> None:
        """Bring up what runs at the sites. On failure :meth:`stop` still releases what started."""

    @abstractmethod
    def stop(self) -> None:
        """Release what :meth:`start` brought up (idempotent)."""

    def start_job(self, job_id: str, site: str, t_s: float) -> None:
        """A job starts (or resumes) at a site."""

    def finish_job(self, job_id: str, t_s: float) -> None:
        """A job has completed its work."""

    @abstractmethod
    def migrate(self, order: MigrationOrder) -> MigrationOutcome:
        """Carry out one migration (in its own thread) and say what happened."""

    def cap_target(self) -> CapTarget:
        """Ballast: nothing trains, caps are modelled."""
        return CapTarget(self.nodes)

    @abstractmethod
    def describe(self) -> dict:
        """For the manifest: what runs at the nodes, what is measured and what is modelled."""


def transfer_id(order: MigrationOrder) -> str:
    """A transfer-service id: job and decision time, restricted to [A-Za-z0-9._-]."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", f"m.{order.job_id}.{order.t_start_s:.0f}")[:128]


def order_lag(order: MigrationOrder, t_begin_s: float) -> float:
    """Scenario seconds between the controller's decision and the transfer's real start."""
    return max(0.0, t_begin_s - order.t_start_s)


MOVERS: Registry[type[Mover]] = Registry("mover")
"""Movers by the kind of nodes they carry (``emulation.nodes``)."""


def register_mover(cls: type[Mover]) -> type[Mover]:
    """Class decorator: the mover of ``cls.nodes``, a live kind registered in :mod:`testbed.node_kinds`."""
    kind = NODE_KINDS.get(getattr(cls, "nodes", None))
    if not kind.live:
        raise ValueError(f"mover {cls.__name__}: {kind.name!r} is not a live kind of nodes")
    return MOVERS.add(kind.name, cls)
