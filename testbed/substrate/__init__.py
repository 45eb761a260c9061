"""Substrates answer 'move these bytes / run this job / set this cap' and report what happened.

Each substrate is a subpackage that registers itself (``testbed.substrate.registry``); importing
this package registers the built-in ones."""

from testbed.substrate.base import MigrationOrder, MigrationOutcome, Substrate
from testbed.substrate.registry import AUTO, SUBSTRATES, SubstrateKind, make_substrate, register_substrate, \
    substrate_choices, unknown_substrate

# the built-in substrates: importing a subpackage registers it (in this order: the CLI lists them so)
from testbed.substrate import sim, netns, mininet, local  # noqa: E402,F401  isort: skip

__all__ = ["AUTO", "SUBSTRATES", "MigrationOrder", "MigrationOutcome", "Substrate", "SubstrateKind", "make_substrate",
           "register_substrate", "substrate_choices", "unknown_substrate"]
