"""Problems of overrides (``--set PATH=VALUE``, ``overrides={PATH: VALUE}``) named by the path as the
user typed it, with the nearest valid key suggested: :mod:`testbed.sweep.override_errors`, which
the sweep's grid and variants share (it lives beside the override engine whose path syntax it reads)."""

from __future__ import annotations

from testbed.sweep.override_errors import (MAX_ENTRIES, attribute, nearest_paths, owner, resolve,  # noqa: F401
                                           with_hint)

__all__ = ["MAX_ENTRIES", "attribute", "nearest_paths", "owner", "resolve", "with_hint"]
