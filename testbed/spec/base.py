"""The base of every spec model (:class:`Strict`) and the small types all of them share.

Every part of a scenario, a topology or a sweep file is a ``Strict`` pydantic model: unknown fields are
errors and numbers are what they claim to be. It sits at the bottom of :mod:`testbed.spec`, so that
any spec module (and a plug-in's model) can build on it without importing another concept's module.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict


class Strict(BaseModel):
    """Unknown fields are errors; numbers are numbers (``true`` is not 1, ``"5"`` is not 5, 2.0 is not an
    integer) and finite (``.inf`` and ``.nan`` are refused wherever a number goes)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


def _list_to_tuple(value: object) -> object:
    return tuple(value) if isinstance(value, list) else value


FloatPair = Annotated[tuple[float, float], BeforeValidator(_list_to_tuple)]
"""``[low, high]`` in YAML (a list), a strict pair of finite numbers in the model."""
