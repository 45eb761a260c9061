"""Typed errors of the training side of node agents."""

from __future__ import annotations

from pathlib import Path

from testbed.errors import TestbedError


class NodesError(TestbedError):
    """Base class of every error :mod:`testbed.nodes` raises on purpose."""


class CheckpointError(NodesError):
    """A checkpoint file is missing, unreadable, truncated, corrupted, of another format, or does not
    match the job it is loaded into. ``path`` names the file; the message says what is wrong."""

    def __init__(self, path: str | Path, message: str):
        self.path = str(path)
        self.message = message
        super().__init__(f"{self.path}: {message}")
