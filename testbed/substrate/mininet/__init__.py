"""The mininet substrate: the emulated base (clock, link replay, movers) over a Mininet-built fabric."""

from __future__ import annotations

import os

from testbed.substrate.registry import SubstrateKind, register_substrate


def _make(inputs, run_id):
    from testbed.substrate.mininet.substrate import MininetSubstrate

    return MininetSubstrate(inputs, run_id=run_id)


def _unavailable(scenario):
    from testbed.substrate.emulated.preflight import live_unavailable
    from testbed.substrate.mininet.switches import SWITCH_ENV, substrate_switch, switch_unavailable

    why = switch_unavailable(substrate_switch())
    if why and os.environ.get(SWITCH_ENV):  # say where the switch was chosen
        why = f"{SWITCH_ENV}={os.environ[SWITCH_ENV]}: {why}"
    return why or live_unavailable(scenario)


register_substrate(SubstrateKind("mininet", "Mininet-built, root", make=_make, live=True, unavailable=_unavailable))


def __getattr__(name: str):
    if name == "MininetSubstrate":  # imported when asked for: listing substrates stays cheap
        from testbed.substrate.mininet.substrate import MininetSubstrate

        return MininetSubstrate
    raise AttributeError(name)


__all__ = ["MininetSubstrate"]
