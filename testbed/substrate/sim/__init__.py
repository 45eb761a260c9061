"""The analytic substrate: virtual time, migrations timed by integrating the true bandwidth trace."""

from __future__ import annotations

from testbed.substrate.registry import SubstrateKind, register_substrate


def _make(inputs, run_id):
    from testbed.substrate.sim.substrate import SimSubstrate

    return SimSubstrate(inputs)


register_substrate(SubstrateKind("sim", "analytic; default", make=_make))


def __getattr__(name: str):
    if name == "SimSubstrate":  # imported when asked for: listing substrates stays cheap
        from testbed.substrate.sim.substrate import SimSubstrate

        return SimSubstrate
    raise AttributeError(name)


__all__ = ["SimSubstrate"]
