"""One power path: the controller asks for a GPU cap per running job at each trace step and one
:class:`CapEnforcer` enforces them, reporting what it enforced (:class:`CapReport`, one per job).

The enforcer is chosen once per run by :func:`testbed.power.factory.make_enforcer` from the
scenario's ``power.backend`` and what the substrate offers (:class:`CapTarget`); each backend
registers itself in its own module (:mod:`testbed.power.backends`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Protocol

from testbed.lifecycle import OpenClose


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
    backend: str                       # the backend's registered name, as in power.backend
    throttle: str = ""                 # the throttle mechanism, e.g. "cgroup-v1", "duty-cycle"
    measured_power_w: float | None = None
    detail: str = ""


@dataclass(frozen=True)
class Throttled:
    """A job's training throughput as a node agent set it. ``window``: what the job achieved
    since the agent was last asked (steps, seconds, enforced_frac measured), when it says."""

    frac: float
    throttle: str = ""  # the mechanism (cgroup-v1, cgroup-v2, duty-cycle)
    reason: str = ""    # why that mechanism, when it is not the first choice
    window: dict | None = None


POWER_MEASURED, POWER_DERIVED, POWER_MODEL = "measured", "derived", "model"


@dataclass(frozen=True)
class Enforcement:
    """What a job's cap came to over one trace step, known once the step is over (``settle``).

    ``throughput_frac``: the enforced fraction *measured* (steps achieved over the reference
    rate's integral) over the time the cap has been in force, or None (nothing ran).
    ``power_w`` and ``power_basis``: ``measured`` (the driver's reading), ``derived`` (the
    profile's draw at the measured enforced throughput: a figure computed from a measurement, not a
    power measurement) or ``model``."""

    throughput_frac: float | None
    power_w: float | None
    power_basis: str
    steps_per_s: float | None = None
    window_s: float = 0.0


class ThroughputPort(Protocol):
    """What a substrate with training agents offers a power backend: slow a job's real training."""

    def job_site(self, job_id: str, site: str) -> str:
        """Where ``job_id`` really trains now (``site``: where the controller believes it is)."""

    def set_throughput(self, job_id: str, site: str, frac: float, cap_w: float) -> Throttled:
        """Make the job at ``site`` train at ``frac`` of its reference pace (``cap_w``: recorded)."""


@dataclass(frozen=True)
class CapTarget:
    """What the substrate offers a power backend: the kind of nodes jobs run on (one of
    :data:`testbed.power.backends.NODE_KINDS`) and, with agents, their throughput port."""

    nodes: str
    port: ThroughputPort | None = None


@dataclass(frozen=True)
class PowerSetup:
    """What a backend's factory gets: the scenario and the substrate's :class:`CapTarget`."""

    scenario: Any
    target: CapTarget

    @property
    def sites(self) -> list[str]:
        return [s.name for s in self.scenario.sites]


class CapEnforcer(OpenClose, ABC):
    """Enforces the caps of one run (one policy). A context manager (:class:`~testbed.lifecycle.OpenClose`):
    leaving it puts back what it changed (real GPUs get their previous limits)."""

    name: str = "abstract"  # the registered backend name (CapReport.backend)

    def close(self) -> None:
        """Undo what enforcing changed (idempotent)."""

    @abstractmethod
    def apply(self, t_s: float, caps: dict[str, JobCap]) -> dict[str, CapReport]:
        """Enforce this step's caps at scenario time ``t_s``: one report per job of ``caps``."""

    def settle(self, t_s: float) -> dict[str, Enforcement]:
        """After the step that began at the last :meth:`apply` ends (scenario time ``t_s``): what
        was measured of it, per job (none by default: nothing measured after the fact)."""
        return {}

    def leaving(self, t_s: float, job_ids: list[str], *, finished: bool) -> None:
        """``job_ids`` are about to leave the nodes they run on (``finished``: for good; else they
        migrate): an enforcer that measures after the fact reads them now, while it still can."""

    def settle_steps(self, t0_s: float, t1_s: float, final: bool = False) -> list[tuple[float, str, Enforcement]]:
        """After the step ``[t0_s, t1_s)``: what was measured, as ``(step start, job, Enforcement)``
        rows, for this step or for earlier ones whose measurement an enforcer deferred until it had
        one (the controller files each row under its step). ``final``: the run's last step, after
        which nothing may stay deferred. By default :meth:`settle`, for this step alone."""
        return [(t0_s, job_id, enf) for job_id, enf in self.settle(t1_s).items()]
