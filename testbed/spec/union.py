"""The registries of what a scenario names by a tag, and the discriminated unions built from them.

One registry per kind (:class:`KindRegistry`): migration policies and selection policies (tagged by
``name``), renewable trace kinds and grid-signal kinds (tagged by ``kind``). Each entry
(:class:`Kind`) holds both halves of one thing: the pydantic model its scenario entries validate
against, and what builds it at run time (a policy class, a trace builder). The builder is a callable,
or a ``"package.module:attr"`` string imported when it is first asked for
(:func:`testbed.registry.resolve`): that is how the built-ins, whose models this layer declares,
name code in the layers above it (``testbed.policies``, ``testbed.traces``) without importing it, so
checking a scenario imports none of it. A plug-in registers its model and its callable builder
together, in its one file, into the same registry.

``Annotated[Any, RegistryUnion("name", registry)]`` validates like a hand-written
``Annotated[Union[A, B, ...], Field(discriminator="name")]`` (same error paths, same
``union_tag_invalid`` message, same JSON schema), with the members read from the registry when
the schema is built. A model that registers later (a plug-in module) rebuilds the models that
hold the union (``rebuild_on_change``), so a scenario naming it validates and the JSON schema
lists it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Generic, Literal, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, Field
from pydantic_core import core_schema

from testbed.registry import Registry, resolve

Hook = str | Callable[..., Any]
"""A builder: a callable, or the ``"module:attr"`` that names one (imported when first used)."""

M = TypeVar("M", bound=type)
B = TypeVar("B")


@dataclass(frozen=True)
class Kind:
    """One registry entry: the scenario model of a thing and what builds it."""

    model: type[BaseModel]
    build: Hook

    def builder(self) -> Any:
        """The builder itself (imported now if it was given by name)."""
        return resolve(self.build)

    def builds(self, obj: object) -> bool:
        """Whether ``obj`` is this entry's builder (given as the object, or by its import path)."""
        if self.build is obj:
            return True
        module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
        return isinstance(self.build, str) and qualname is not None and self.build == f"{module}:{qualname}"


E = TypeVar("E", bound=Kind)


class KindRegistry(Registry[E], Generic[E]):
    """The one registry of a kind: tag value -> :class:`Kind` (or the subclass ``entry``, for a kind
    whose entries say more). ``base``: the ``"module:Class"`` every builder of this kind subclasses,
    where there is one (a policy study's base class)."""

    def __init__(self, what: str, tag: str, entry: type[E] = Kind, base: str | None = None) -> None:  # type: ignore[assignment]
        super().__init__(what)
        self.tag, self.entry, self.base = tag, entry, base

    def add_kind(self, model: type[BaseModel], build: Hook, **more: Any) -> E:
        """Register ``model`` (its ``tag`` field a one-value ``Literal``) with its builder. The same
        entry again is a no-op (a module imported twice); another under a taken tag is refused."""
        if not (callable(build) or (isinstance(build, str) and ":" in build)):
            raise TypeError(f"a {self.what}'s builder must be callable or 'module:attr', got {build!r}")
        return self.add(check_member(model, self.tag), self.entry(model=model, build=build, **more))

    def declare(self, build: Hook, **more: Any) -> Callable[[M], M]:
        """Class decorator of a model: register it with ``build`` (how the built-ins, declared in the
        spec layer, name their builder: ``"testbed.traces.solar:build"``)."""
        def deco(model: M) -> M:
            self.add_kind(model, build, **more)
            return model

        return deco

    def implements(self, model: type[BaseModel], **more: Any) -> Callable[[B], B]:
        """Decorator of a builder (a class or a function): register ``model`` with it (how a plug-in,
        one file, registers both)."""
        def deco(build: B) -> B:
            self.add_kind(model, build, **more)  # type: ignore[arg-type]
            return build

        return deco

    def model(self, name: str) -> type[BaseModel]:
        return self.get(name).model

    def builder(self, name: str) -> Any:
        """The builder of ``name`` (``UnknownNameError`` naming the known ones if none is registered)."""
        return self.get(name).builder()

    def name_of(self, build: object) -> str | None:
        """The name ``build`` is registered under, if it is one of this registry's builders."""
        return next((name for name, entry in self.items() if entry.builds(build)), None)

    def base_class(self) -> type | None:
        """The class named by ``base``, if its module is imported; None otherwise (then no class
        subclasses it: a subclass's module has imported it). Nothing is imported here."""
        if self.base is None:
            return None
        module, _, attr = self.base.partition(":")
        found = getattr(sys.modules.get(module), attr, None)
        return found if isinstance(found, type) else None


class RegistryUnion:
    """Annotated metadata: the union of every model in ``registries``, tagged by field ``tag``."""

    def __init__(self, tag: str, *registries: KindRegistry[Any]) -> None:
        self.tag = tag
        self.registries = registries

    def members(self) -> list[tuple[str, type[BaseModel]]]:
        return [(name, entry.model) for r in self.registries for name, entry in r.items()]

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
    field = getattr(model, "model_fields", {}).get(tag)
    args = get_args(field.annotation) if field is not None else ()
    if field is None or get_origin(field.annotation) is not Literal or len(args) != 1 or not isinstance(args[0], str):
        raise TypeError(f"{getattr(model, '__name__', model)} needs a field {tag!r} typed Literal['<its name>']")
    return args[0]


def rebuild_on_change(models: list[type[BaseModel]], *registries: Registry[Any]) -> None:
    """After a new entry in any of ``registries``, rebuild ``models`` in this order (inner first)."""
    def rebuild() -> None:
        for m in models:
            m.model_rebuild(force=True)

    for r in registries:
        r.on_change(rebuild)
