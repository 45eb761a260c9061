"""The analytic substrate: virtual time, migrations timed by integrating the true bandwidth trace."""

from __future__ import annotations

from testbed.substrate.registry import SubstrateKind, register_substrate


def _make(inputs, run_id):
    from testbed.substrate.sim.substrate import SimSubstrate

    return SimSubstrate(inputs)


def _doctor(caps):
    return [], "analytic, no privileges"


# auto's last resort (rank 0, never refused); the federated study's exchange is the link model's
register_substrate(SubstrateKind("sim", "analytic; default", make=_make, doctor=_doctor,
                                 federated="testbed.federated.exchange:modelled_exchange", auto_rank=0))


def __getattr__(name: str):
    if name == "SimSubstrate":  # imported when asked for: listing substrates stays cheap
        from testbed.substrate.sim.substrate import SimSubstrate

        return SimSubstrate
    raise AttributeError(name)


__all__ = ["SimSubstrate"]
