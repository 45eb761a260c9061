"""Parse YAML that may be hostile: bounded nesting, bounded alias expansion, no duplicate keys.

PyYAML's safe loader accepts things a scenario file must not contain:

* duplicate keys (the last one silently wins);
* nesting thousands of levels deep (its composer recurses: a ``RecursionError`` traceback);
* aliases that expand exponentially ("billion laughs": a few lines that stand for 10^9 values,
  which any later walk over the data -- validation, copying, JSON -- materialises);
* an alias inside its own anchor (a cyclic structure).

:func:`parse_yaml` refuses all four with a :class:`YamlProblem` naming the line, *before* the
data is built. Messages never quote the document's text (the file may not be the user's own):
they say what is wrong and where (line and column), and name a duplicate key only when it looks
like one of testbed's own keys (lower case: a field, site or link name, a sweep path).
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.resolver import Resolver

MAX_DEPTH = 64
"""Deepest nesting of lists/mappings accepted (a scenario needs about 8)."""

MAX_NODES = 1_000_000
"""Most values a document may stand for once every alias is expanded."""

_QUOTED = re.compile(r"""\s*(?:'[^']*'|"[^"]*"|#x[0-9a-fA-F]+)""")
# keys named in messages: field names, site names, link keys, sweep paths (lower case); others are not echoed
_NAME = re.compile(r"^[a-z0-9_$][a-z0-9_.,\[\] ${}-]{0,80}$")
_TOKEN = re.compile(r"'(?:[\[\]{},:?-]|<[a-z ]+>)'")


class YamlProblem(Exception):
    """``line`` is 1-based (None when the problem has no position)."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None):
        super().__init__(message)
        self.message, self.line, self.column = message, line, column


def _at(mark: Any) -> tuple[int | None, int | None]:
    if mark is None:
        return None, None
    return mark.line + 1, mark.column + 1


try:  # libyaml parses (not recursive, 3-4x faster); the composer and constructor below are Python
    from yaml.cyaml import CParser

    class _Base(Composer, CParser, SafeConstructor, Resolver):
        def __init__(self, stream: str):
            CParser.__init__(self, stream)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)
            Composer.__init__(self)
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    _Base = yaml.SafeLoader  # type: ignore[misc,assignment]


class _Loader(_Base):
    """A safe loader with a nesting bound in the composer and duplicate-key checks in the constructor."""

    def __init__(self, stream: str):
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                line, col = _at(self.peek_event().start_mark)
                raise YamlProblem(f"nested more than {MAX_DEPTH} levels deep", line, col)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict:
        if isinstance(node, MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if not isinstance(key_node, ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node)
                line = key_node.start_mark.line + 1
                try:
                    if key in seen:
                        shown = f"duplicate key {key!r}" if _NAME.match(str(key)) else "duplicate key"
                        raise YamlProblem(f"{shown} (first at line {seen[key]})", line, key_node.start_mark.column + 1)
                    seen[key] = line
                except TypeError:  # unhashable: the base constructor reports it
                    continue
        return super().construct_mapping(node, deep=deep)


# YAML 1.1 (PyYAML) reads ``1e9`` and ``1.0e9`` as strings (it wants ``1.0e+9``); YAML 1.2 and
# every user read them as numbers. The resolver table is copied first: PyYAML's
# add_implicit_resolver would append to the lists SafeLoader shares.
_Loader.yaml_implicit_resolvers = {k: list(v) for k, v in Resolver.yaml_implicit_resolvers.items()}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."))


def _expanded_size(root: Node) -> None:
    """Count the values the document stands for with aliases expanded; refuse cycles and bombs.

    Shared nodes (aliases) are counted once per use but computed once (memoised), so the count
    itself costs time proportional to the distinct nodes, however large the expansion.
    """
    size: dict[int, int] = {}
    active: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        nid = id(node)
        if done:
            active.discard(nid)
            children = _children(node)
            total = 1 + sum(size[id(c)] for c in children)
            if total > MAX_NODES:
                line, col = _at(node.start_mark)
                raise YamlProblem(f"expands to more than {MAX_NODES:,} values through aliases (an alias bomb?)",
                                  line, col)
            size[nid] = total
            continue
        if nid in size:
            continue
        if nid in active:
            line, col = _at(node.start_mark)
            raise YamlProblem("an alias refers to the mapping or list that contains it (a cycle)", line, col)
        active.add(nid)
        stack.append((node, True))
        for child in _children(node):
            cid = id(child)
            if cid in active:
                line, col = _at(child.start_mark)
                raise YamlProblem("an alias refers to the mapping or list that contains it (a cycle)", line, col)
            if cid not in size:
                stack.append((child, False))


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def _keep_token(m: re.Match) -> str:
    quoted = m.group(0).strip()
    return " " + quoted if _TOKEN.fullmatch(quoted) else ""


def _clean(problem: str | None) -> str:
    """PyYAML's problem text without anything it quoted from the document (its own token names,
    such as ``','`` or ``'<block end>'``, stay)."""
    text = _QUOTED.sub(_keep_token, problem or "").strip()
    return " ".join(text.split()) or "syntax error"


def parse_yaml(text: str) -> Any:
    """One YAML document as Python data (see the module docstring); YamlProblem if refused."""
    try:
        loader = _Loader(text)
    except yaml.reader.ReaderError as e:
        raise YamlProblem(f"not valid YAML: a character that YAML does not allow (at character {e.position})") from None
    try:
        try:
            node = loader.get_single_node()
        except RecursionError:  # pragma: no cover - MAX_DEPTH keeps the composer far from the limit
            raise YamlProblem(f"nested too deeply (more than {MAX_DEPTH} levels)") from None
        if node is None:
            return None
        _expanded_size(node)
        return loader.construct_document(node)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line, col = _at(mark)
        if "nesting depth" in (e.problem or ""):  # libyaml's own bound (1000 flow levels), met while scanning ahead
            raise YamlProblem(f"nested more than {MAX_DEPTH} levels deep", line, col) from None
        raise YamlProblem(f"not valid YAML: {_clean(e.problem or e.context)}", line, col) from None
    except yaml.reader.ReaderError as e:
        raise YamlProblem(f"not valid YAML: a character that YAML does not allow (at character {e.position})") from None
    except yaml.YAMLError as e:
        raise YamlProblem(f"not valid YAML: {type(e).__name__}") from None
    finally:
        dispose = getattr(loader, "dispose", None)
        if dispose is not None:
            dispose()
