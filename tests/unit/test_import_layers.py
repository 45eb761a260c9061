"""The named layers of docs/architecture.md hold, and no import cycle between testbed's first-level
units, lazy imports included.

A unit is a subpackage (``testbed.netem``) or a top-level module (``testbed.runner``).
Every ``import``/``from`` statement in every module is read from the AST, including
the ones inside functions, and mapped to the unit it lands in.  Cycles between units
are the strongly connected components of that graph with more than one unit.

Layers: the table under "## Layers" in docs/architecture.md (one row per layer, top first: number
and name, units in backticks, one sentence). Every unit is in exactly one row and imports only its
own layer or lower ones; a failure names the file and line of the import.

The allowlist is a ratchet of import edges known to close a cycle.  With those edges taken out the
graph must be acyclic (within a layer too), so any new cycle fails; and an allowlisted edge that no
longer exists, or no longer lies on a cycle, fails too, so the list can only shrink.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

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
    return [mod for mod, _ in _import_sites_of(path)]


def _import_sites_of(path: Path) -> list[tuple[str, int]]:
    return _import_sites(path.read_text(encoding="utf-8"), _module_name(path), path.name == "__init__.py")


def _imports_in(source: str, here: str, is_pkg: bool) -> list[str]:
    return [mod for mod, _ in _import_sites(source, here, is_pkg)]


def _import_sites(source: str, here: str, is_pkg: bool) -> list[tuple[str, int]]:
    """(absolute module name, line) of every import in ``source``, at any depth of its AST."""
    tree = ast.parse(source)
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno) for alias in node.names)
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
            found.append((mod, node.lineno))
            # ``from testbed import runner`` imports the unit testbed.runner (``__version__`` is a name)
            if mod == PACKAGE:
                found.extend((f"{PACKAGE}.{alias.name}", node.lineno) for alias in node.names if _is_unit(alias.name))
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


ARCHITECTURE = ROOT.parent / "docs" / "architecture.md"
LAYERS_HEADING = "## Layers"
DOC = "docs/architecture.md"


@dataclass(frozen=True)
class Layer:
    rank: int  # 1: the lowest
    name: str
    units: tuple[str, ...]
    sentence: str


class LayerTableError(ValueError):
    """The layer table of docs/architecture.md cannot be read."""


_ROW_NAME = re.compile(r"^(\d+)\s+(\S.*)$")


def parse_layers(text: str) -> list[Layer]:
    """The rows of the first table under the "## Layers" heading, lowest layer first. Rows are
    written top first, each "| N name | `unit` `unit` ... | One sentence. |", N counting down to 1."""
    lines = text.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == LAYERS_HEADING)
    except StopIteration:
        raise LayerTableError(f"{DOC} has no '{LAYERS_HEADING}' heading") from None
    rows: list[str] = []
    for line in lines[start + 1:]:
        if line.startswith("#"):
            break
        if line.lstrip().startswith("|"):
            rows.append(line.strip())
        elif rows:
            break
    if len(rows) < 3:
        raise LayerTableError(f"{DOC}: no layer table under '{LAYERS_HEADING}'")
    body = rows[2:]  # after the header and its |---| line
    layers: list[Layer] = []
    seen: dict[str, str] = {}
    for top_index, row in enumerate(body):
        cells = [c.strip() for c in row.strip("|").split("|")]
        if len(cells) != 3:
            raise LayerTableError(f"{DOC}: layer row {row[:60]!r} has {len(cells)} cells, not 3 (layer, units, sentence)")
        head, units_cell, sentence = cells
        m = _ROW_NAME.match(head)
        if m is None:
            raise LayerTableError(f"{DOC}: layer {head!r} is not 'N name'")
        rank, name = int(m.group(1)), m.group(2).strip()
        if rank != len(body) - top_index:
            raise LayerTableError(f"{DOC}: layer {head!r} is row {top_index + 1} from the top of {len(body)}: "
                                  f"it should be numbered {len(body) - top_index}")
        units = tuple(re.findall(r"`([^`]+)`", units_cell))
        if not units:
            raise LayerTableError(f"{DOC}: layer {name!r} names no unit")
        if not sentence.endswith("."):
            raise LayerTableError(f"{DOC}: layer {name!r} needs its one sentence")
        for u in units:
            if u in seen:
                raise LayerTableError(f"{DOC}: {u} is in two layers, {seen[u]!r} and {name!r}")
            seen[u] = name
        layers.append(Layer(rank, name, units, sentence))
    return sorted(layers, key=lambda layer: layer.rank)


def import_sites() -> list[tuple[str, int, str, str]]:
    """(file, line, importing unit, imported unit) of every import between two units of testbed."""
    out = []
    for path in sorted(ROOT.rglob("*.py")):
        src = _unit(_module_name(path))
        if src is None:
            continue
        for mod, line in _import_sites_of(path):
            dst = _unit(mod)
            if dst is not None and dst != src:
                out.append((path.relative_to(ROOT.parent).as_posix(), line, _short(src), _short(dst)))
    return out


def layer_problems(layers: list[Layer], units: set[str], sites: list[tuple[str, int, str, str]]) -> list[str]:
    """What breaks the layer table: a unit in no layer, a name that is no unit, an import upward."""
    of = {u: layer for layer in layers for u in layer.units}
    msgs = [f"{DOC}: unit {u} is in no layer (add it to one row of the layer table)" for u in sorted(units - set(of))]
    msgs += [f"{DOC}: layer {of[u].rank} {of[u].name} names {u}, which is not a unit of testbed/"
             for u in sorted(set(of) - units)]
    for file, line, src, dst in sites:
        a, b = of.get(src), of.get(dst)
        if a is not None and b is not None and b.rank > a.rank:
            msgs.append(f"{file}:{line}: {src} (layer {a.rank} {a.name}) imports {dst} "
                        f"(layer {b.rank} {b.name}), a higher layer")
    return msgs


def test_the_layers_of_docs_architecture_hold_for_every_import():
    layers = parse_layers(ARCHITECTURE.read_text(encoding="utf-8"))
    assert 6 <= len(layers) <= 8, f"{DOC}: {len(layers)} layers (the design has 6 to 8)"
    units = {_short(u) for u in unit_graph()}
    msgs = layer_problems(layers, units, import_sites())
    assert not msgs, "\n".join(msgs)


_TABLE = """# Architecture

## Layers

| Layer (top first) | Units | What it holds |
|---|---|---|
| 3 top | `runner` `cli` | The top. |
| 2 middle | `spec` | The middle. |
| 1 bottom | `errors` | The bottom. |

## Next
"""


def test_the_parser_reads_rows_top_first_and_ranks_them_from_the_bottom():
    layers = parse_layers(_TABLE)
    assert [(layer.rank, layer.name, layer.units) for layer in layers] == [
        (1, "bottom", ("errors",)), (2, "middle", ("spec",)), (3, "top", ("runner", "cli"))]
    assert layers[0].sentence == "The bottom."


@pytest.mark.parametrize("bad, why", [
    (_TABLE.replace("`spec`", "`errors`"), "errors is in two layers, 'middle' and 'bottom'"),
    (_TABLE.replace("| 2 middle", "| 1 middle"), "should be numbered 2"),
    (_TABLE.replace("| 2 middle", "| middle"), "is not 'N name'"),
    (_TABLE.replace(" The middle. |", " |"), "needs its one sentence"),
    (_TABLE.replace("`spec`", "spec"), "names no unit"),
    (_TABLE.replace("## Layers", "## Strata"), "no '## Layers' heading"),
])
def test_the_parser_refuses_a_bad_table(bad, why):
    with pytest.raises(LayerTableError, match=re.escape(why)):
        parse_layers(bad)


def test_an_upward_import_a_missing_and_an_unknown_unit_fail():
    layers = parse_layers(_TABLE)
    sites = [("testbed/spec/load.py", 12, "spec", "errors"),   # downward: fine
             ("testbed/cli/main.py", 3, "cli", "runner"),      # the same layer: fine
             ("testbed/spec/load.py", 40, "spec", "runner")]   # upward
    msgs = layer_problems(layers, {"errors", "spec", "runner", "cli", "netem"}, sites)
    assert msgs == [f"{DOC}: unit netem is in no layer (add it to one row of the layer table)",
                    "testbed/spec/load.py:40: spec (layer 2 middle) imports runner (layer 3 top), a higher layer"]
    assert layer_problems(layers, {"errors", "spec", "runner"}, []) == [
        f"{DOC}: layer 3 top names cli, which is not a unit of testbed/"]


def test_the_real_imports_fail_a_table_with_spec_moved_to_the_bottom():
    """The check bites on the real package: put spec in the lowest layer and its imports of io_model,
    power and the rest are upward, each named by file and line."""
    layers = parse_layers(ARCHITECTURE.read_text(encoding="utf-8"))
    moved = [Layer(layer.rank, layer.name,
                   tuple(u for u in layer.units if u != "spec") + (("spec",) if layer.rank == 1 else ()),
                   layer.sentence)
             for layer in layers if layer.units != ("spec",)]
    units = {_short(u) for u in unit_graph()}
    msgs = layer_problems(moved, units, import_sites())
    assert msgs and all(re.match(r"testbed/spec/\S+\.py:\d+: spec \(layer 1 foundation\) imports ", m) for m in msgs), msgs
    assert any("testbed/spec/scenario.py:" in m and "imports power (layer 2 host)" in m for m in msgs)
