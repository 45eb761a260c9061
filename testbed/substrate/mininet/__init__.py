"""The mininet substrate: the netns substrate's controller path over a Mininet-built fabric."""

from testbed.substrate.mininet.substrate import MininetSubstrate

__all__ = ["MininetSubstrate"]
