"""Whether this machine can run a scenario on a live substrate, answered before anything is built:
a combination it cannot run is refused up front with one line, never half-way through a run.

Checked: pyroute2, the Python modules the scenario's kind of nodes needs (``torch`` for agents) and
what its node runtime says (its entry's ``unavailable``, :mod:`testbed.node_kinds`; for ``docker``
the private engine's tools, its image cache and a way to the base image,
:func:`testbed.substrate.emulated.containers.docker_unavailable`). Root is the runner's check;
Mininet's tools are the mininet substrate's
(:func:`testbed.substrate.mininet.switches.switch_unavailable`).
"""

from __future__ import annotations

import importlib.util


def live_unavailable(scenario) -> str | None:
    """Why ``scenario`` cannot run on a live fabric here, or None."""
    from testbed.node_kinds import NODE_KINDS, NODE_RUNTIMES

    if importlib.util.find_spec("pyroute2") is None:  # an optional dependency: the simulator needs none of it
        return "pyroute2 is not installed (live fabrics are built with it): pip install -e '.[emulation]' (scripts/setup.sh does)"
    em = scenario.emulation
    kind = NODE_KINDS.get(em.nodes)
    missing = [m for m in kind.requires_modules if importlib.util.find_spec(m) is None]
    if missing:
        return f"nodes {kind.name!r} need {', '.join(missing)}, which is not installed"
    unavailable = NODE_RUNTIMES.get(em.runtime).hook("unavailable")
    return unavailable(scenario) if unavailable is not None else None
