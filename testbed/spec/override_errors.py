"""Problems of overrides (``--set PATH=VALUE``, ``overrides={PATH: VALUE}``) named by the path as the
user typed it, with the nearest valid key suggested (a ``[label]`` that names no entry gets the
nearest label from the override engine, :mod:`testbed.spec.overrides`).

Validation names a list entry by its index (``policies[2].alpha``) while an override may select it
by label (``policies[feasibility_aware].alpha``); :func:`resolve` maps one onto the other, so that
a problem found while validating is reported under the override that caused it (:func:`owner`).
The sweep names a grid axis's or a variant's unknown key with it (``grid[feasibility.alpah]``), and
``testbed run --set`` and ``testbed.run(overrides=)`` with the same functions.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from testbed.suggest import suggest
from testbed.spec.overrides import _shown, _steps  # the path syntax of the override engine

MAX_ENTRIES = 200
"""Longest list whose entries are offered as suggestions (a job list can hold 50,000)."""


def _ident(item: Any) -> Any:
    """How an override selects a list entry: its label, else its name (a bare string is its name)."""
    if isinstance(item, str):
        return item
    return (item.get("label") or item.get("name")) if isinstance(item, dict) else None


def resolve(data: Any, path: str) -> str:
    """``path`` with every ``[label]`` selector that names exactly one entry of ``data`` replaced by
    that entry's index, as validation errors name it (``policies[feasibility_aware].alpha`` ->
    ``policies[2].alpha``). Parts below a missing key or an unknown label stay as typed."""
    try:
        steps = _steps(path)
    except ValueError:
        return path
    node, out = data, []
    for step in steps:
        if isinstance(step, tuple) and isinstance(node, list):
            hits = [k for k, item in enumerate(node) if _ident(item) == step[0]]
            step = hits[0] if len(hits) == 1 else step
        out.append(step)
        if isinstance(step, str):
            node = node.get(step) if isinstance(node, dict) else None
        elif isinstance(step, int) and isinstance(node, list) and -len(node) <= step < len(node):
            node = node[step]
        else:
            node = None
    return _shown(out)


def _under(where: str, path: str) -> bool:
    return where == path or where.startswith((f"{path}.", f"{path}["))


def owner(where: str, message: str, resolved: Mapping[str, str]) -> tuple[str, str] | None:
    """The override (as typed) that a validation problem at ``where`` belongs to, and the problem's
    place below it (``""`` when it is the override's own path); None if it belongs to none.
    ``resolved``: override path as validation names it (:func:`resolve`) -> path as typed.

    A problem at or under an overridden path is that override's; so is an unknown field above it
    (the override created the key: the scenario was valid before the overrides were applied)."""
    for indexed, typed in resolved.items():
        if _under(where, indexed):
            return typed, where[len(indexed):]
        if message.startswith("unknown field") and _under(indexed, where):
            return typed, "" if where == indexed else where
    return None


def attribute(where: str, message: str, resolved: Mapping[str, str], valid: Any = None) -> tuple[str, str, str] | None:
    """A validation problem (``where``, ``message``) as the override that caused it names it: the
    override as typed, the place below it (``"[0].x"``, ``".x"``; ``""`` for the override's own path)
    and the message, an unknown key gaining the nearest valid paths of ``valid``; None when no
    override caused it (:func:`owner`). An unknown key above the override's path (one the override
    made) is named in the message: ``feasibilty.alpha`` -> ``feasibilty: unknown field (...)``."""
    mine = owner(where, message, resolved)
    if mine is None:
        return None
    typed, below = mine
    if below.startswith(("[", ".")):  # under the override: its own path, then the rest
        return typed, below, message
    if below:  # an unknown key above it, which the override made
        return typed, "", f"{below}: {with_hint(message, below, valid)}"
    return typed, "", with_hint(message, typed, valid)


def _paths(node: Any, prefix: str = "", depth: int = 0) -> Iterable[str]:
    """Every key path in a scenario's data, list entries by label (or name) where they have one."""
    if depth > 8:
        return
    if isinstance(node, dict):
        for k, v in node.items():
            here = f"{prefix}.{k}" if prefix else str(k)
            yield here
            yield from _paths(v, here, depth + 1)
    elif isinstance(node, list) and len(node) <= MAX_ENTRIES:
        for i, v in enumerate(node):
            name = _ident(v) if isinstance(v, dict) else None
            yield from _paths(v, f"{prefix}[{name if isinstance(name, str) else i}]", depth + 1)


def nearest_paths(path: str, valid_data: Any) -> list[str]:
    """Valid paths of the scenario whose last key is the nearest to the one typed (``alpah`` ->
    ``feasibility.alpha``, ``policies[no_filter].alpha``, ...), at most three."""
    leaf = path.rsplit(".", 1)[-1].split("[", 1)[0]
    paths = [p for p in _paths(valid_data) if p != path]
    leaves = {p.rsplit(".", 1)[-1].split("[", 1)[0] for p in paths}
    best = suggest(leaf, leaves)[:1]
    return [p for p in paths if best and p.rsplit(".", 1)[-1] == best[0]][:3]


def with_hint(message: str, path: str, valid: Any) -> str:
    """``unknown field`` with no suggestion of its own gains the nearest valid paths of ``valid``
    (the scenario before the overrides: a Scenario or its data), if any."""
    if message != "unknown field" or valid is None:
        return message
    if hasattr(valid, "model_dump"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            valid = valid.model_dump(mode="json")
    near = nearest_paths(path, valid)
    return f"{message} (did you mean {' or '.join(near)}?)" if near else message
