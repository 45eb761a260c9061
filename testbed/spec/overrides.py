"""Set values inside a scenario's raw data by path (pure: plain dicts and lists, no validation).

A path is dotted keys with optional list selectors:

- ``traces.bandwidth.steady_degradation_pct``: mapping keys; missing intermediate mappings are
  created (the scenario model then rejects keys it does not know);
- ``links[0].bandwidth_gbps``: a list element by index;
- ``policies[feasibility_aware].epsilon``: a list element by its ``label``, else its ``name`` (the
  way policies are labelled); a bare string entry such as ``- static`` counts as ``{name: static}``
  and becomes a mapping when a key below it is set.

``${name}`` strings in a value are replaced by the sweep parameter ``$name`` (whole strings only,
so the parameter keeps its type), which lets one variant reuse a grid value in another place.
"""

from __future__ import annotations

import copy
import re
from typing import Any

_KEY = r"[A-Za-z_][A-Za-z0-9_]*"
_SELECTOR = r"\[[^\[\]]+\]"
_STEP = re.compile(rf"({_KEY})((?:{_SELECTOR})*)")
_PATH = re.compile(rf"^{_KEY}(?:{_SELECTOR})*(?:\.{_KEY}(?:{_SELECTOR})*)*$")
_REF = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")
PARAM = re.compile(r"^\$([A-Za-z_][A-Za-z0-9_]*)$")


class OverrideError(ValueError):
    """A path that does not fit the data (message names the failing part)."""


def check_path(path: str) -> str | None:
    """None if ``path`` is well-formed, else why not."""
    if not _PATH.match(path):
        return f"not a valid path {path!r} (expected keys joined by '.', with [index] or [label] selectors)"
    return None


def _steps(path: str) -> list[str | int | tuple[str]]:
    """``a.b[2].c[x]`` -> ['a', 'b', 2, 'c', ('x',)]: str = key, int = index, 1-tuple = label."""
    out: list[str | int | tuple[str]] = []
    for part in path.split("."):
        m = _STEP.fullmatch(part)
        if m is None:
            raise OverrideError(f"not a valid path {path!r}")
        out.append(m.group(1))
        for sel in re.findall(_SELECTOR, m.group(2)):
            inner = sel[1:-1].strip()
            out.append(int(inner) if re.fullmatch(r"-?\d+", inner) else (inner,))
    return out


def _shown(steps: list) -> str:
    text = ""
    for s in steps:
        if isinstance(s, int):
            text += f"[{s}]"
        elif isinstance(s, tuple):
            text += f"[{s[0]}]"
        else:
            text += f".{s}" if text else s
    return text


def _select(items: list, label: str, where: str) -> int:
    """Index of the list element whose label (else name) is ``label``, as policies are labelled."""
    def ident(item: Any) -> Any:
        if isinstance(item, str):
            return item
        return (item.get("label") or item.get("name")) if isinstance(item, dict) else None

    hits = [i for i, item in enumerate(items) if ident(item) == label]
    if len(hits) == 1:
        return hits[0]
    if hits:
        raise OverrideError(f"{where}: {len(hits)} entries are named {label!r}; select by index")
    from testbed.suggest import did_you_mean

    names = sorted({str(ident(item)) for item in items})
    raise OverrideError(f"{where}: no entry with label or name {label!r}{did_you_mean(label, names)} "
                        f"(present: {', '.join(names) or 'none'})")


def set_path(data: dict, path: str, value: Any) -> None:
    """Set ``path`` in ``data`` (in place) to a deep copy of ``value``."""
    steps = _steps(path)
    node: Any = data
    for i, step in enumerate(steps):
        last = i == len(steps) - 1
        where = _shown(steps[: i + 1])
        if isinstance(step, str):
            if not isinstance(node, dict):
                raise OverrideError(f"{_shown(steps[:i]) or '(top level)'}: is not a mapping, cannot set {step!r}")
            if last:
                node[step] = copy.deepcopy(value)
                return
            if node.get(step) is None:
                node[step] = [] if isinstance(steps[i + 1], (int, tuple)) else {}
            node = node[step]
            continue
        if not isinstance(node, list):
            raise OverrideError(f"{_shown(steps[:i])}: is not a list (got {type(node).__name__})")
        if isinstance(step, tuple):
            idx = _select(node, step[0], _shown(steps[:i]))
        else:
            idx = step
            if not -len(node) <= idx < len(node):
                raise OverrideError(f"{where}: index out of range (the list has {len(node)} entries)")
        if last:
            node[idx] = copy.deepcopy(value)
            return
        if isinstance(node[idx], str) and isinstance(steps[i + 1], str):
            node[idx] = {"name": node[idx]}  # a bare policy name becomes a mapping we can extend
        node = node[idx]


def references(value: Any) -> set[str]:
    """Names of the ``${name}`` parameters used anywhere in ``value``."""
    if isinstance(value, str):
        m = _REF.match(value)
        return {m.group(1)} if m else set()
    if isinstance(value, dict):
        return set().union(*(references(v) for v in value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*(references(v) for v in value)) if value else set()
    return set()


def substitute(value: Any, params: dict[str, Any]) -> Any:
    """``value`` with every whole-string ``${name}`` replaced by ``params[name]``."""
    if isinstance(value, str):
        m = _REF.match(value)
        return copy.deepcopy(params[m.group(1)]) if m else value
    if isinstance(value, dict):
        return {k: substitute(v, params) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, params) for v in value]
    return value
