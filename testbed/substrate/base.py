"""The contract every substrate (sim, netns, mininet, docker) fulfils for the one controller."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Literal


@dataclass(frozen=True)
class MigrationOrder:
    """Move one job's checkpoint from ``src`` to ``dst``, starting at scenario time ``t_start_s``."""

    job_id: str
    src: str
    dst: str
    size_gb: float
    t_start_s: float


@dataclass(frozen=True)
class MigrationOutcome:
    """What really happened (scenario seconds). ``resume_s`` is when the job runs again."""

    order: MigrationOrder
    status: Literal["completed", "failed"]
    transfer_s: float
    load_s: float
    downtime_s: float
    goodput_gbps: float
    detail: str = ""
    phases_measured: tuple[str, ...] = field(default=())
    checkpoint_s: float = 0.0  # taking the checkpoint at the source (not in the paper's model)
    checkpoint_bytes: int | None = None  # the real checkpoint's size (the rest of the transfer is ballast)

    @property
    def total_s(self) -> float:
        return self.checkpoint_s + self.transfer_s + self.load_s + self.downtime_s

    @property
    def resume_s(self) -> float:
        return self.order.t_start_s + self.total_s


@dataclass(frozen=True)
class JobCap:
    """The GPU cap the controller asks for one running job's node during a trace step."""

    site: str
    cap_w: float            # clamped to the GPU's range
    throughput_frac: float  # the profile's prediction at cap_w
    draw_w: float           # the profile's modelled GPU draw at cap_w


@dataclass(frozen=True)
class CapReport:
    """What the power backend says it enforced (and, where it can, measured)."""

    enforced_cap_w: float
    throughput_frac: float
    backend: str                       # "model" | "emulated-throttle" | "nvml"
    throttle: str = ""                 # the throttle mechanism, e.g. "cgroup-v1", "duty-cycle"
    measured_power_w: float | None = None
    detail: str = ""


class Substrate(ABC):
    """Lifecycle: ``with substrate: ...``; resources are released on every exit path."""

    name: str = "abstract"

    def __enter__(self) -> "Substrate":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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

    def apply_caps(self, t_s: float, caps: dict[str, JobCap]) -> dict[str, CapReport]:
        """Enforce this step's GPU caps on running jobs. The analytic substrate only models them:
        the cap is enforced exactly as requested. Live substrates throttle real training."""
        return {job: CapReport(c.cap_w, c.throughput_frac, "model") for job, c in caps.items()}

    @abstractmethod
    def describe(self) -> dict:
        """For the manifest: substrate name, scale factors, and which quantities are measured vs modelled."""
