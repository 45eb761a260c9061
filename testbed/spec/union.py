"""Discriminated unions of the scenario derived from registries of pydantic models.

``Annotated[Any, RegistryUnion("name", registry)]`` validates like today's hand-written
``Annotated[Union[A, B, ...], Field(discriminator="name")]`` (same error paths, same
``union_tag_invalid`` message, same JSON schema), with the members read from the registry when
the schema is built. A model that registers later (a plug-in module) rebuilds the models that
hold the union (``rebuild_on_change``), so a scenario naming it validates and the JSON schema
lists it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, Field
from pydantic_core import core_schema

from testbed.registry import Registry


class RegistryUnion:
    """Annotated metadata: the union of every model in ``registries``, tagged by field ``tag``."""

    def __init__(self, tag: str, *registries: Registry[type[BaseModel]]) -> None:
        self.tag = tag
        self.registries = registries

    def members(self) -> list[tuple[str, type[BaseModel]]]:
        return [item for r in self.registries for item in r.items()]

    def tags(self) -> frozenset[str]:
        return frozenset(name for name, _ in self.members())

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> core_schema.CoreSchema:
        members = self.members()
        if not members:
            raise TypeError(f"no model registered for the {self.tag!r} union of {[r.what for r in self.registries]}")
        if len(members) == 1:  # Union[X] is X: build the one-member tagged union by hand
            name, model = members[0]
            return core_schema.tagged_union_schema({name: handler.generate_schema(model)}, discriminator=self.tag)
        union = Annotated[Union[tuple(model for _, model in members)], Field(discriminator=self.tag)]  # noqa: UP007
        return handler.generate_schema(union)


def check_member(model: type[BaseModel], tag: str) -> str:
    """The tag value a model carries: its ``tag`` field must be a one-value ``Literal`` string."""
    field = model.model_fields.get(tag)
    args = get_args(field.annotation) if field is not None else ()
    if field is None or get_origin(field.annotation) is not Literal or len(args) != 1 or not isinstance(args[0], str):
        raise TypeError(f"{model.__name__} needs a field {tag!r} typed Literal['<its name>']")
    return args[0]


def register_model(registry: Registry[type[BaseModel]], tag: str, model: type[BaseModel]) -> type[BaseModel]:
    """Add ``model`` under the value of its ``Literal`` tag field (usable as a class decorator)."""
    return registry.add(check_member(model, tag), model)


def rebuild_on_change(models: list[type[BaseModel]], *registries: Registry[Any]) -> None:
    """After a new entry in any of ``registries``, rebuild ``models`` in this order (inner first)."""
    def rebuild() -> None:
        for m in models:
            m.model_rebuild(force=True)

    for r in registries:
        r.on_change(rebuild)
