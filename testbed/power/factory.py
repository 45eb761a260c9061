"""The one place a run's cap enforcer is chosen: from ``power.backend`` and the substrate's
:class:`~testbed.power.caps.CapTarget`, through the registry (:mod:`testbed.power.backends`)."""

from __future__ import annotations

from testbed.power.caps import CapEnforcer, CapTarget, PowerSetup
from testbed.power.backends import PowerBackend, resolve


def backend_for(scenario, nodes: str) -> PowerBackend:
    """The backend a run on ``nodes`` gets; SpecError (``power.backend``) when it cannot cap them."""
    return resolve(scenario.power.backend, nodes)


def make_enforcer(scenario, target: CapTarget) -> CapEnforcer:
    """A fresh enforcer for one run (a context manager: enter it before the first ``apply``)."""
    backend = backend_for(scenario, target.nodes)
    enforcer = backend.factory(PowerSetup(scenario, target))
    if not isinstance(enforcer, CapEnforcer) or enforcer.name != backend.name:
        raise TypeError(f"power backend {backend.name!r}: its factory must return a CapEnforcer named {backend.name!r}")
    return enforcer
