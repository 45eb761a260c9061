"""Tests that flood a server with connections raise their own open-file limit first (shared helper)."""

from __future__ import annotations

import resource

import pytest


def raise_own_fd_limit(need: int) -> None:
    """This process may open ``need`` files (soft limit raised up to the hard one), or the test skips."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        if hard != resource.RLIM_INFINITY and hard < need:
            pytest.skip(f"needs {need} open files, the hard limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
