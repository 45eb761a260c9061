"""Policies named by class: ``class: "package.module:ClassName"`` in a scenario's policy entry.

A policy entry may name its implementation instead of a registered name::

    policies:
      - class: "my_lab.policies:GreedyRenewable"    # import path (module:Class)
        label: greedy                                # optional; default: the class's ``name``
        min_surplus_kw: 5                            # the class's own parameters (its ``Params`` model)
      - class: "policies/greedy.py:GreedyRenewable"  # a file, relative to the scenario's folder
      - class: greedy_renewable                      # an installed entry point (group testbed.policies)

The class decides the study: a :class:`~testbed.controller.policy_api.Policy` subclass is a
migration policy, a :class:`~testbed.federated.policies.base.SelectionPolicy` subclass a
federated (PowerTrip study) selection policy. Its parameters are the fields of its optional
``Params`` pydantic model; they sit beside ``class`` in the entry and are validated with field paths.

This module sits in the scenario layer and imports nothing above it. A class is registered in the
one registry of its study's policies (:data:`testbed.spec.policies.MIGRATION_POLICIES` or
:data:`testbed.spec.federated.SELECTION_POLICIES`), which runs it as it runs a built-in: the study is
the registry whose base class (its ``base``) the class subclasses, and a class already registered
there (by its own ``@register_policy``, or a built-in named by import path) keeps its name.

``resolve_class_entries`` runs before the scenario is validated: it imports each named class,
registers it (its spec model joins the scenario's policy union, exactly like a built-in's) under
a tag and rewrites the entry's ``class`` into ``name: <tag>``. The tag is the import path as
written (``module:Class``), the file's absolute path with ``:Class``, or the entry point's name,
so a resolved scenario (the manifest's) loads again. ``name: <entry point>`` works like
``class: <entry point>`` for a name no built-in carries.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import re
import sys
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, create_model

from testbed.spec.base import Strict
from testbed.spec.union import KindRegistry

ENTRY_POINT_GROUP = "testbed.policies"
LABEL_PATTERN = r"^[A-Za-z0-9_.-]{1,64}$"
_IMPORT_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_RESERVED = ("name", "label", "grid_topup_kw", "round_time")


def _studies() -> tuple[tuple[KindRegistry, type[BaseModel]], ...]:
    """Each study's policy registry and the base of its policies' models."""
    from testbed.spec.federated import SELECTION_POLICIES, SelectionPolicyBase
    from testbed.spec.policies import MIGRATION_POLICIES, MigrationPolicyBase

    return ((MIGRATION_POLICIES, MigrationPolicyBase), (SELECTION_POLICIES, SelectionPolicyBase))


class PolicyParams(Strict):
    """Base of a plug-in policy's ``Params``: its fields are the entry's parameters (unknown keys,
    wrong types and out-of-range values are errors naming the field)."""


class PluginProblem(Exception):
    """(field path, message) of a class entry that cannot be resolved."""

    def __init__(self, where: str, message: str):
        super().__init__(message)
        self.where, self.message = where, message


# ------------------------------------------------------------------------------- finding the class


def import_plugin_module(mod: str, search: list[Path]) -> Any:
    """``mod`` imported; where it is not found, again with ``search`` (the scenario's folder, the
    working directory) at the front of ``sys.path``."""
    try:
        return importlib.import_module(mod)
    except ModuleNotFoundError as e:
        if e.name is None or not (mod == e.name or mod.startswith(e.name + ".")):
            raise  # the module exists; something it imports does not
    added = [str(p) for p in search if str(p) not in sys.path]
    sys.path[:0] = added
    try:
        importlib.invalidate_caches()
        return importlib.import_module(mod)
    finally:
        for p in added:
            sys.path.remove(p)


def import_plugin_file(path: Path) -> Any:
    """A ``.py`` file loaded as a module once per absolute path (a second load is the same module)."""
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:12]
    name = f"testbed_plugin_{re.sub(r'[^A-Za-z0-9_]', '_', path.stem)}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _entry_point(name: str) -> Any | None:
    found = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
    return found[0] if found else None


def entry_point_names() -> tuple[str, ...]:
    """The policy names installed packages offer (entry point group ``testbed.policies``)."""
    return tuple(sorted({ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)}))


def load_class(ref: object, where: str, base_dir: Path) -> tuple[type, str]:
    """The class ``ref`` names and the tag it registers under. Every failure is a PluginProblem
    naming ``where`` (the entry's ``class`` field)."""
    if not isinstance(ref, str) or not ref.strip():
        raise PluginProblem(where, "must be 'package.module:ClassName', 'file.py:ClassName' or an installed "
                                   f"policy's name (entry point group {ENTRY_POINT_GROUP})")
    ref = ref.strip()
    if ":" not in ref:
        ep = _entry_point(ref)
        if ep is None:
            raise PluginProblem(where, f"no installed policy {ref!r} (entry point group {ENTRY_POINT_GROUP}: "
                                       f"{', '.join(entry_point_names()) or 'none'}); name a class as "
                                       "'package.module:ClassName'")
        try:
            obj = ep.load()
        except Exception as e:  # noqa: BLE001 — the plug-in's own failure, reported in one line
            raise PluginProblem(where, f"loading entry point {ref!r} ({ep.value}) failed: {type(e).__name__}: {e}") from None
        return obj, ref
    mod, _, attr = ref.rpartition(":")
    if not _IDENT.match(attr):
        raise PluginProblem(where, f"{attr!r} is not a class name (give 'package.module:ClassName')")
    try:
        if mod.endswith(".py"):
            from testbed.spec.files import resolve_file

            path = resolve_file(mod, base_dir)
            if path is None or not path.is_file():
                raise PluginProblem(where, f"file not found: {mod}")
            module, tag = import_plugin_file(path), f"{path}:{attr}"
        else:
            if not _IMPORT_PATH.match(mod):
                raise PluginProblem(where, f"{mod!r} is not a module path (give 'package.module:ClassName')")
            module, tag = import_plugin_module(mod, [base_dir, Path.cwd()]), ref
    except PluginProblem:
        raise
    except ModuleNotFoundError as e:
        raise PluginProblem(where, f"cannot import {mod!r}: no module named {e.name!r}") from None
    except Exception as e:  # noqa: BLE001 — the plug-in's own failure, reported in one line
        raise PluginProblem(where, f"importing {mod!r} failed: {type(e).__name__}: {e}") from None
    if not hasattr(module, attr):
        raise PluginProblem(where, f"module {mod!r} has no attribute {attr!r}")
    return getattr(module, attr), tag


# ------------------------------------------------------------------------------- registering it


def _study_of(cls: object, where: str, ref: str) -> tuple[KindRegistry, type[BaseModel]]:
    """The registry of the study whose base class ``cls`` subclasses, and the base of its models."""
    study = next(((registry, base) for registry, base in _studies()
                  if isinstance(cls, type) and (b := registry.base_class()) is not None and issubclass(cls, b)), None)
    if study is None:
        raise PluginProblem(where, f"{ref!r} is not a policy class: subclass testbed.controller.policy_api.Policy "
                                   "(migration study) or testbed.federated.policies.SelectionPolicy (federated study)")
    if inspect.isabstract(cls):
        missing = ", ".join(sorted(getattr(cls, "__abstractmethods__", ())))
        raise PluginProblem(where, f"{ref!r} does not implement {missing}")
    return study


def _default_label(cls: type) -> str:
    own = cls.__dict__.get("name")
    if isinstance(own, str) and re.match(LABEL_PATTERN, own):
        return own
    return re.sub(r"(?<!^)(?=[A-Z])", "_", cls.__name__).lower()[:64]


def _spec_model(cls: type, tag: str, base: type[BaseModel], where: str, base_dir: Path) -> type[BaseModel]:
    """The scenario model of entries naming ``cls``: the study's policy base, the class's ``Params``
    fields, and ``name: Literal[tag]``."""
    params = getattr(cls, "Params", None)
    bases: tuple[type, ...] = (base,)
    if params is not None:
        if not (isinstance(params, type) and issubclass(params, BaseModel)):
            raise PluginProblem(where, f"{tag!r}: its Params must be a pydantic model (subclass testbed.policies.PolicyParams)")
        clash = sorted(set(params.model_fields) & set(_RESERVED))
        if clash:
            raise PluginProblem(where, f"{tag!r}: its Params may not declare {', '.join(clash)} (the testbed's own fields)")
        bases = (base, params)
    label = _default_label(cls)
    model = create_model(  # type: ignore[call-overload]
        f"{cls.__name__}Spec", __base__=bases, __module__=cls.__module__,
        name=(Literal[tag], Field(description=f"plug-in policy {tag}")),
        label=(str | None, Field(label, pattern=LABEL_PATTERN, description=f"Output name (default: {label}).")),
    )
    search = str(base_dir)

    def __reduce__(self):  # a made-up class is not importable: another process resolves the class again
        return _rebuild_spec, (tag, search, self.model_dump_json())

    model.__reduce__ = __reduce__
    model.__policy_class__ = tag  # made here for a class named by a scenario (not registered by its own file)
    return model


def _rebuild_spec(tag: str, base_dir: str, json_text: str) -> BaseModel:
    """A plug-in policy's entry in another process (a sweep's trial): its class loaded and
    registered there, the entry validated again."""
    cls, tag = load_class(tag, "policies", Path(base_dir))
    name = register_class(cls, tag, "policies", Path(base_dir))
    registry = next(r for r, _ in _studies() if name in r)
    return registry.model(name).model_validate_json(json_text)


def register_class(cls: object, tag: str, where: str, base_dir: Path) -> str:
    """Register ``cls`` (checked to be a policy) under ``tag``; the name entries carry for it."""
    registry, base = _study_of(cls, where, tag)
    assert isinstance(cls, type)
    own = registry.name_of(cls)  # registered already: by its own file, or a built-in named by import path
    if own is not None:
        return own
    for taken, _ in _studies():
        if tag in taken:
            if getattr(taken.model(tag), "__policy_class__", None) is not None:  # a class resolved here before
                raise PluginProblem(where, f"{tag!r} names a different class than it did before in this process")
            raise PluginProblem(where, f"{tag!r} is a built-in policy's name; the installed one cannot replace it")
    registry.add_kind(_spec_model(cls, tag, base, where, base_dir), cls)  # joins the scenario's union
    return tag


def shown_name(name: str) -> str:
    """A policy's name as outputs show it: a plug-in loaded from a file (its tag holds the file's
    absolute path, so that a copied scenario still finds it) is ``<file name>:<Class>``; every
    other name as it is (a built-in, ``module:Class``, an installed policy)."""
    head, sep, cls = name.rpartition(":")
    if sep and ("/" in head or head.endswith(".py")):
        return f"{Path(head).name}:{cls}"
    return name


def _known(name: object) -> bool:
    return isinstance(name, str) and any(name in registry for registry, _ in _studies())


def resolve_class_entries(data: dict, base_dir: Path) -> dict:
    """``data`` (a raw scenario) with every policy entry naming a class rewritten to ``name: <tag>``,
    its class registered. Raises SpecError with one problem per entry that cannot be resolved."""
    from testbed.errors import SpecError

    policies = data.get("policies") if isinstance(data, dict) else None
    if isinstance(policies, (str, dict)):
        policies = [policies]
    if not isinstance(policies, list):
        return data
    out: list[Any] = []
    problems: list[tuple[str, str]] = []
    changed = False
    for i, entry in enumerate(policies):
        where = f"policies[{i}]"
        ref: object = None
        if isinstance(entry, dict) and "class" in entry:
            if "name" in entry and entry["name"] != entry["class"]:
                problems.append((f"{where}.class", "give 'class' (a plug-in) or 'name' (a registered policy), not both"))
                out.append(entry)
                continue
            ref, field = entry["class"], f"{where}.class"
        else:
            name = entry.get("name") if isinstance(entry, dict) else entry
            if isinstance(name, str) and not _known(name) and (":" in name or _entry_point(name) is not None):
                ref, field = name, f"{where}.name"  # a resolved plug-in's tag, or an installed policy's name
        if ref is None:
            out.append(entry)
            continue
        try:
            cls, tag = load_class(ref, field, base_dir)
            tag = register_class(cls, tag, field, base_dir)
        except PluginProblem as p:
            problems.append((p.where, p.message))
            out.append(entry)
            continue
        rest = {k: v for k, v in entry.items() if k not in ("class", "name")} if isinstance(entry, dict) else {}
        out.append({"name": tag, **rest})
        changed = True
    if problems:
        raise SpecError(problems)
    return {**data, "policies": out} if changed else data
