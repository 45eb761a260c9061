"""The analytic substrate: virtual time, migrations timed by integrating the true bandwidth trace."""

from testbed.substrate.sim.substrate import SimSubstrate

__all__ = ["SimSubstrate"]
