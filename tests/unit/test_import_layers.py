"""No import cycle between testbed's first-level units, lazy imports included.

A unit is a subpackage (``testbed.netem``) or a top-level module (``testbed.runner``).
Every ``import``/``from`` statement in every module is read from the AST, including
the ones inside functions, and mapped to the unit it lands in.  Cycles between units
are the strongly connected components of that graph with more than one unit.

The allowlist is a ratchet of import edges known to close a cycle ("upward" edges,
against the layer order in docs/reference/layout.md).  With those edges taken out the graph must be
acyclic, so any new cycle fails; and an allowlisted edge that no longer exists, or no
longer lies on a cycle, fails too, so the list can only shrink.
"""

from __future__ import annotations

import ast
from pathlib import Path

import testbed

# (importer, imported, where): each an upward edge that closes a cycle today.
# Remove an entry when its cycle is broken; never add one.
ALLOWED_BACK_EDGES: list[tuple[str, str, str]] = []

PACKAGE = "testbed"
ROOT = Path(testbed.__file__).resolve().parent


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_unit(name: str) -> bool:
    return (ROOT / f"{name}.py").is_file() or (ROOT / name / "__init__.py").is_file()


def _unit(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != PACKAGE or len(parts) < 2:
        return None
    return ".".join(parts[:2])


def _imported_modules(path: Path) -> list[str]:
    """Absolute names of every module a file imports, at any depth of its AST."""
    return _imports_in(path.read_text(encoding="utf-8"), _module_name(path), path.name == "__init__.py")


def _imports_in(source: str, here: str, is_pkg: bool) -> list[str]:
    tree = ast.parse(source)
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".")
                if not is_pkg:
                    base = base[:-1]
                if node.level > 1:
                    base = base[: len(base) - (node.level - 1)]
                prefix = ".".join(base)
                mod = f"{prefix}.{node.module}" if node.module else prefix
            else:
                mod = node.module or ""
            found.append(mod)
            # ``from testbed import runner`` imports the unit testbed.runner (``__version__`` is a name)
            if mod == PACKAGE:
                found.extend(f"{PACKAGE}.{alias.name}" for alias in node.names if _is_unit(alias.name))
    return found


def unit_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        src = _unit(_module_name(path))
        if src is None:
            continue
        graph.setdefault(src, set())
        for mod in _imported_modules(path):
            dst = _unit(mod)
            if dst is not None and dst != src:
                graph[src].add(dst)
                graph.setdefault(dst, set())
    return graph


def strongly_connected(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """Tarjan's algorithm (iterative); only components of two or more units."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[frozenset[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    comp.add(member)
                    if member == node:
                        break
                if len(comp) > 1:
                    out.append(frozenset(comp))
    return out


def _fmt(comp: frozenset[str]) -> str:
    return " <-> ".join(sorted(u.removeprefix(PACKAGE + ".") for u in comp))


def _edges_within(graph: dict[str, set[str]], comp: frozenset[str]) -> str:
    return "; ".join(
        f"{a.removeprefix(PACKAGE + '.')} -> {b.removeprefix(PACKAGE + '.')}"
        for a in sorted(comp)
        for b in sorted(graph[a] & comp)
    )


def test_scc_finds_a_planted_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert strongly_connected(graph) == [frozenset({"a", "b", "c"})]
    assert strongly_connected({"a": {"b"}, "b": set()}) == []


def test_relative_and_lazy_imports_are_seen():
    src = ("import os\n"
           "def f():\n"
           "    from ..runner import x\n"
           "    if True:\n"
           "        import testbed.cli.parser\n"
           "class C:\n"
           "    def g(self):\n"
           "        from . import qdisc\n"
           "        from testbed import feasibility\n")
    got = _imports_in(src, "testbed.netem.fabric", is_pkg=False)
    assert {"testbed.runner", "testbed.cli.parser", "testbed.netem", "testbed.feasibility"} <= set(got)
    assert _imports_in("from .probes import p", "testbed.doctor", is_pkg=True) == ["testbed.doctor.probes"]
    assert {_unit(m) for m in got} >= {"testbed.runner", "testbed.cli", "testbed.feasibility"}
    assert _unit("os") is None and _unit("testbed") is None


def _short(unit: str) -> str:
    return unit.removeprefix(PACKAGE + ".")


def test_no_import_cycle_between_units():
    graph = unit_graph()
    allowed = {(f"{PACKAGE}.{a}", f"{PACKAGE}.{b}") for a, b, _ in ALLOWED_BACK_EDGES}
    pruned = {a: {b for b in bs if (a, b) not in allowed} for a, bs in graph.items()}
    msgs = [
        f"import cycle: {_fmt(c)} (edges: {_edges_within(pruned, c)})"
        for c in strongly_connected(pruned)
    ]
    in_cycle = {u: c for c in strongly_connected(graph) for u in c}
    for a, b in sorted(allowed):
        if b not in graph.get(a, set()):
            msgs.append(f"allowlisted edge {_short(a)} -> {_short(b)} no longer exists: remove it")
        elif in_cycle.get(a) is None or b not in in_cycle[a]:
            msgs.append(f"allowlisted edge {_short(a)} -> {_short(b)} closes no cycle now: remove it")
    assert not msgs, "\n".join(msgs)


README = ROOT.parent / "docs" / "reference" / "layout.md"  # the layer line moved here from README.md
LAYER_INTRO = "Layers import downward only"


def readme_layers() -> list[list[str]]:
    """The layer line of docs/reference/layout.md: groups left (lowest) to right, ``a/b`` for units side by side,
    ``a+b`` for units that still import each other (an allowlisted cycle)."""
    import re

    text = README.read_text(encoding="utf-8")
    after = text[text.index(LAYER_INTRO):]
    line = next(span for span in re.findall(r"`([^`]*)`", after) if "->" in span)
    return [[u.strip() for u in group.replace("+", "/").split("/")] for group in line.split("->")]


def test_readme_layer_line_matches_the_imports():
    layers = readme_layers()
    where = {u: i for i, group in enumerate(layers) for u in group}
    graph = unit_graph()
    units = {_short(u) for u in graph} - {"__main__"}
    msgs = [f"layer line (docs/reference/layout.md) lacks {u}" for u in sorted(units - set(where))]
    msgs += [f"layer line (docs/reference/layout.md) names {u}, which is not a unit" for u in sorted(set(where) - units)]
    allowed = {(a, b) for a, b, _ in ALLOWED_BACK_EDGES}
    for a in sorted(graph):
        for b in sorted(graph[a]):
            sa, sb = _short(a), _short(b)
            if sa not in where or sb not in where:
                continue
            if where[sb] > where[sa] or (where[sb] == where[sa] and (sa, sb) not in allowed
                                           and (sb, sa) not in allowed):
                msgs.append(f"{sa} imports {sb}, which docs/reference/layout.md puts {'above' if where[sb] > where[sa] else 'beside'} it")
    assert not msgs, "\n".join(msgs)
