"""Figure titles in words: what a figure shows, never a scenario file's stem or an internal name."""

from __future__ import annotations


def words(label: str) -> str:
    """A policy's label as a title says it: ``feasibility_aware`` -> ``feasibility aware``."""
    return str(label).replace("_", " ")
