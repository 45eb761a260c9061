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

This module sits in the scenario layer and imports nothing above it. The layers above register
into it: each study's base class (:data:`POLICY_BASES`, by the module that defines it, so a class
that subclasses it finds it registered), the name a class's own ``@register_policy`` gave it
(:func:`note_registered`), and each study's runner registry adopts the classes resolved here
(:data:`PLUGIN_CLASSES`, whose listeners they are).

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
from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Literal

from dataclasses import dataclass

from pydantic import BaseModel, Field, create_model

from testbed.registry import Registry
from testbed.spec.base import Strict

ENTRY_POINT_GROUP = "testbed.policies"
LABEL_PATTERN = r"^[A-Za-z0-9_.-]{1,64}$"
_IMPORT_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_RESERVED = ("name", "label", "grid_topup_kw", "round_time")
STUDIES = ("migration", "federated")

POLICY_BASES: Registry[type] = Registry("policy base class")
"""Study (``migration``, ``federated``) -> the base class a plug-in of that study subclasses;
registered by the module that defines the base (testbed.controller.policy_api,
testbed.federated.policies.base)."""


@dataclass(frozen=True)
class PluginClass:
    cls: type
    model: type[BaseModel]  # the entries' spec model (``name: Literal[tag]``)
    study: str              # migration | federated


PLUGIN_CLASSES: Registry[PluginClass] = Registry("plug-in policy")
"""Tag -> a class resolved here; the study's policy registry (testbed.policies.registry,
testbed.federated.policies.registry) listens and registers it as it registers a built-in."""

def adopt_plugins(study: str, registry: Registry, register: Callable[[type[BaseModel]], Callable[[type], type]]) -> None:
    """Make a study's policy registry adopt the classes resolved here for ``study``, now and whenever
    another is resolved, as the class's own ``register(model)`` decorator would."""

    def adopt() -> None:
        for tag, plugin in PLUGIN_CLASSES.items():
            if plugin.study == study and tag not in registry:
                register(plugin.model)(plugin.cls)

    PLUGIN_CLASSES.on_change(adopt)
    adopt()


_OWN_NAMES: dict[int, tuple[object, str]] = {}  # id(class) -> (class, the name its own module registered it under)


def note_registered(build: object, name: str) -> None:
    """Called by ``@register_policy`` / ``@register_selection_policy``: ``build`` runs the entries named
    ``name``, so an entry naming its class by import path gets that name."""
    _OWN_NAMES[id(build)] = (build, name)


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


def _study_of(cls: object, where: str, ref: str) -> str:
    """The study whose base class ``cls`` subclasses. A base registers itself when its module is
    imported, and a subclass's module has imported it, so an unregistered base has no subclasses."""
    study = next((s for s in STUDIES if s in POLICY_BASES and isinstance(cls, type)
                  and issubclass(cls, POLICY_BASES.get(s))), None)
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


def _spec_model(cls: type, tag: str, study: str, where: str, base_dir: Path) -> type[BaseModel]:
    """The scenario model of entries naming ``cls``: the study's policy base, the class's ``Params``
    fields, and ``name: Literal[tag]``."""
    from testbed.spec.federated import SelectionPolicyBase
    from testbed.spec.policies import MigrationPolicyBase

    base = MigrationPolicyBase if study == "migration" else SelectionPolicyBase
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
    return model


def _rebuild_spec(tag: str, base_dir: str, json_text: str) -> BaseModel:
    """A plug-in policy's entry in another process (a sweep's trial): its class loaded and
    registered there, the entry validated again."""
    from testbed.spec.federated import SELECTION_POLICY_SPECS
    from testbed.spec.policies import MIGRATION_POLICY_SPECS

    cls, tag = load_class(tag, "policies", Path(base_dir))
    name = register_class(cls, tag, "policies", Path(base_dir))
    reg = MIGRATION_POLICY_SPECS if name in MIGRATION_POLICY_SPECS else SELECTION_POLICY_SPECS
    return reg.get(name).model_validate_json(json_text)


def _registered_name(cls: type) -> str | None:
    """The name ``cls`` already carries where its own module registered it (``@register_policy``)."""
    own = _OWN_NAMES.get(id(cls))
    return own[1] if own is not None and own[0] is cls else None


def register_class(cls: object, tag: str, where: str, base_dir: Path) -> str:
    """Register ``cls`` (checked to be a policy) under ``tag``; the name entries carry for it."""
    study = _study_of(cls, where, tag)
    assert isinstance(cls, type)
    own = _registered_name(cls)
    if own is not None:
        return own
    if tag in PLUGIN_CLASSES:
        if PLUGIN_CLASSES.get(tag).cls is not cls:
            raise PluginProblem(where, f"{tag!r} names a different class than it did before in this process")
        return tag
    from testbed.spec.federated import SELECTION_POLICY_SPECS, selection_policy
    from testbed.spec.policies import MIGRATION_POLICY_SPECS, migration_policy

    if tag in MIGRATION_POLICY_SPECS or tag in SELECTION_POLICY_SPECS:
        raise PluginProblem(where, f"{tag!r} is a built-in policy's name; the installed one cannot replace it")
    model = _spec_model(cls, tag, study, where, base_dir)
    (migration_policy if study == "migration" else selection_policy)(model)  # joins the scenario's union
    PLUGIN_CLASSES.add(tag, PluginClass(cls, model, study))  # the study's registry (if imported) adopts it
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
    from testbed.spec.federated import SELECTION_POLICY_SPECS
    from testbed.spec.policies import MIGRATION_POLICY_SPECS

    return isinstance(name, str) and (name in MIGRATION_POLICY_SPECS or name in SELECTION_POLICY_SPECS)


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
