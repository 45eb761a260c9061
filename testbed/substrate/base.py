"""The contract every substrate (sim, netns, mininet, docker) fulfils for the one controller."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Literal

from testbed.lifecycle import OpenClose
from testbed.power.caps import CapTarget


@dataclass(frozen=True)
class MigrationOrder:
    """Move one job's checkpoint from ``src`` to ``dst``, starting at scenario time ``t_start_s``."""

    job_id: str
    src: str
    dst: str
    checkpoint_gb: float
    t_start_s: float


@dataclass(frozen=True)
class HostLoadSample:
    """The host's CPU during a measured migration, in cores (:mod:`testbed.substrate.emulated.host_load`)."""

    host_cores: float
    own_cores: float
    other_cores: float
    steal_cores: float
    contended: bool


@dataclass(frozen=True)
class MigrationOutcome:
    """What happened, in scenario seconds. ``phases_measured`` names the phases that were measured
    (the migration record files them as ``actual_*`` as well as ``outcome_*``); the others are
    modelled (``outcome_*`` only, ``outcome_basis`` modelled): the analytic substrate measures none.

    The phases: ``checkpoint_s`` (saving the checkpoint at the source; not in the paper's model),
    ``transfer_s`` (bytes on the wire, connect to the receiver's final ack), ``load_s`` (making the
    received checkpoint durable and reading it back, deserialising it with agents) and
    ``downtime_s`` (the rest of pause-to-resume: pausing and restarting the job). ``start_lag_s``
    is the control plane's delay between the decision and the first phase (an artefact of the
    emulation's control loop, kept out of the phases); ``control_wall_s`` the control plane's own
    wall seconds (commands and their answers, unscaled). Emulated disk I/O moves ``io_bytes`` (the
    scaled checkpoint), is measured on ``io_sample_bytes`` (those, topped up to
    ``testbed.transfer.disk_io.SAMPLE_MIN_BYTES``) and scaled back to the real size at the measured
    throughputs ``save_bytes_per_s`` / ``load_bytes_per_s``."""

    order: MigrationOrder
    status: Literal["completed", "failed"]
    transfer_s: float
    load_s: float
    downtime_s: float
    goodput_gbps: float
    detail: str = ""
    phases_measured: tuple[str, ...] = field(default=())
    checkpoint_s: float = 0.0
    checkpoint_bytes: int | None = None  # the real checkpoint's size (the rest of the transfer is ballast)
    start_lag_s: float = 0.0
    control_wall_s: float | None = None
    io_bytes: int | None = None
    io_sample_bytes: int | None = None
    save_bytes_per_s: float | None = None
    load_bytes_per_s: float | None = None
    host_load: HostLoadSample | None = None
    resume_floor_s: float = 0.0  # the emulation reported it no earlier than this (its clock had passed it)

    @property
    def total_s(self) -> float:
        return self.checkpoint_s + self.transfer_s + self.load_s + self.downtime_s

    @property
    def resume_s(self) -> float:
        return max(self.order.t_start_s + self.start_lag_s + self.total_s, self.resume_floor_s)


class Substrate(OpenClose, ABC):
    """Lifecycle: ``with substrate: ...`` (:class:`~testbed.lifecycle.OpenClose`: ``open``, which a
    live substrate overrides, then ``close``); resources are released on every exit path."""

    name: str = "abstract"

    def close(self) -> None:
        """Release every live resource this substrate owns (idempotent)."""

    @abstractmethod
    def start_migration(self, order: MigrationOrder) -> None:
        """Begin moving the checkpoint; the outcome is reported by :meth:`poll`."""

    @abstractmethod
    def poll(self, until_s: float) -> list[MigrationOutcome]:
        """Advance to scenario time ``until_s`` and return migrations that ended by then, in order."""

    @abstractmethod
    def in_flight(self) -> list[MigrationOrder]:
        """Migrations started and not yet reported."""

    def start_job(self, job_id: str, site: str, t_s: float) -> None:
        """A job starts (or resumes) at a site. The sim models progress; live substrates run it."""

    def finish_job(self, job_id: str, t_s: float) -> None:
        """A job has completed its work."""

    def cap_target(self) -> CapTarget:
        """What a power backend can cap here (:mod:`testbed.power.caps`): the analytic substrate runs
        nothing, so caps can only be modelled. Live substrates say which nodes run jobs and, with
        training agents, give the port that slows a job's real training."""
        return CapTarget("analytic")

    @abstractmethod
    def describe(self) -> dict:
        """For the manifest: substrate name, scale factors, and which quantities are measured vs modelled."""
