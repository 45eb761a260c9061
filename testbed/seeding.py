"""Derived seeds: every random stream is reproducible from the scenario seed and a name."""

from __future__ import annotations

import hashlib

import numpy as np


def derive_seed(base: int, *keys: object) -> int:
    """A stable 63-bit seed from a base seed and any names (independent of PYTHONHASHSEED)."""
    text = ":".join([str(base), *map(str, keys)])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") >> 1


def rng(base: int, *keys: object) -> np.random.Generator:
    return np.random.default_rng(derive_seed(base, *keys))


def pick_seed(explicit: int | None, base: int, *keys: object) -> int:
    """An explicit sub-seed from the scenario wins; otherwise derive one from the scenario seed."""
    return explicit if explicit is not None else derive_seed(base, *keys)
