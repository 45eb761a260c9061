"""Substrates answer 'move these bytes / run this job / set this cap' and report what happened."""

from testbed.substrate.base import MigrationOrder, MigrationOutcome, Substrate

__all__ = ["MigrationOrder", "MigrationOutcome", "Substrate"]
