"""The documentation site (mkdocs.yml, docs/, scripts/mkdocs_hooks.py): it builds with ``--strict``
(a broken link, a missing page or a bad anchor fails the build), every Markdown page under docs/ is in
the navigation, the reference pages generated at build time name every scenario and topology field of
the JSON Schema and every command of the argparse parser, every committed reference figure is shown
with its command, the site fetches nothing from the network, and the README stays a two-minute read."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"


def _hooks():
    spec = importlib.util.spec_from_file_location("mkdocs_hooks", ROOT / "scripts" / "mkdocs_hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _nav_pages(nav) -> list[str]:
    out = []
    if isinstance(nav, str):
        out.append(nav)
    elif isinstance(nav, list):
        for item in nav:
            out += _nav_pages(item)
    elif isinstance(nav, dict):
        for value in nav.values():
            out += _nav_pages(value)
    return out


def _config() -> dict:
    return yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    pytest.importorskip("mkdocs", reason="the dev extra (scripts/setup.sh installs it) brings MkDocs")
    pytest.importorskip("material", reason="the dev extra brings mkdocs-material")
    pytest.importorskip("mkdocstrings", reason="the dev extra brings mkdocstrings[python]")
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-f", str(ROOT / "mkdocs.yml"),
                           "-d", str(out)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout}\n{proc.stderr}"
    return out


def test_site_builds_strict(site):
    for page in ("index.html", "get-started/tutorial/index.html", "reference/cli/index.html",
                 "reference/scenario-fields/index.html", "reference/python-api/index.html", "outputs/index.html"):
        assert (site / page).is_file(), page


def test_every_page_is_in_the_nav():
    nav = set(_nav_pages(_config()["nav"]))
    generated = set(_hooks().generated_pages())
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    assert not sorted(pages - nav), f"pages under docs/ missing from the nav in mkdocs.yml: {sorted(pages - nav)}"
    assert not sorted(nav - pages - generated), f"nav entries with no page: {sorted(nav - pages - generated)}"


def _sections(markdown: str) -> dict[str, str]:
    """A generated schema page by section: '## Name {...}' heading -> its text."""
    out, name = {}, None
    for line in markdown.splitlines():
        m = re.match(r"^## (\S+)", line)
        if m:
            name = m.group(1)
            out[name] = ""
        elif name is not None:
            out[name] += line + "\n"
    return out


@pytest.mark.parametrize("topology", [False, True], ids=["scenario", "topology"])
def test_generated_field_reference_names_every_field(topology):
    from testbed.cli.cmd_schema import json_schema

    hooks = _hooks()
    schema = json_schema(topology=topology)
    page = hooks.topology_page() if topology else hooks.scenario_page()
    sections = _sections(page)
    expected = [(schema["title"], name) for name in schema["properties"]]
    expected += [(model, name) for model, body in schema.get("$defs", {}).items() for name in body.get("properties", {})]
    assert len(expected) > (10 if topology else 200)
    missing = [f"{model}.{name}" for model, name in expected
               if f"| `{name}` |" not in sections.get(model, "")]
    assert not missing, f"fields the generated reference does not name in their model's section: {missing}"


def test_generated_field_reference_follows_the_code(site):
    """The built page is made from the code's schema: every model is a section of the built site. The
    schema is the one a fresh process makes, as the site's build does (a plug-in another test in this
    process registered joins this process's schema only)."""
    import json
    import subprocess
    import sys

    html = (site / "reference" / "scenario-fields" / "index.html").read_text(encoding="utf-8")
    schema = json.loads(subprocess.run(
        [sys.executable, "-c", "import json; from testbed.cli.cmd_schema import json_schema; print(json.dumps(json_schema()))"],
        capture_output=True, text=True, check=True, timeout=120).stdout)
    for model in schema["$defs"]:
        assert f'id="{_hooks()._anchor(model)}"' in html, model
    for name in schema["properties"]:
        assert f"<code>{name}</code>" in html, name


def test_generated_cli_reference_names_every_command(site):
    import argparse

    from testbed.cli import build_parser

    def walk(parser, prefix):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield f"{prefix} {name}", sub
                    yield from walk(sub, f"{prefix} {name}")

    page = _hooks().cli_page()
    html = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    commands = list(walk(build_parser(), "testbed"))
    assert len(commands) >= 20
    for command, sub in commands:
        assert f"`{command}`" in page, f"{command}: no section in the generated CLI reference"
        assert f"<code>{command}</code>" in html, command
        for action in sub._actions:
            for flag in action.option_strings:
                if flag.startswith("--") and flag != "--help" and action.help != argparse.SUPPRESS:
                    assert f"`{flag}`" in page, f"{command} {flag}: not in the generated CLI reference"


def test_reference_figures_are_shown_with_their_commands():
    """Every figure of the committed reference reports appears on a Measured page, and every figure
    there is under a heading whose section holds the command that made it."""
    measured = {p.name: p.read_text(encoding="utf-8") for p in (DOCS / "measured").glob("*.md")}
    text = "\n".join(measured.values())
    for _, path in _hooks().report_figures():
        assert path.name in text, f"{path.relative_to(ROOT)}: not on a Measured page"
    for name in ("migration.md", "powertrip.md"):
        for section in re.split(r"\n## ", measured[name])[1:]:
            if ".png)" in section:
                assert re.search(r"(testbed (sweep|report)|scripts/reference\.sh)", section), section[:200]


def test_site_fetches_nothing(site):
    """Offline: no script, stylesheet, font or image from another host (the diagrams are SVG files)."""
    bad = []
    for page in site.rglob("*.html"):
        html = page.read_text(encoding="utf-8")
        for m in re.finditer(r'<(script|link|img|iframe)\b[^>]*\b(src|href)="(https?:)?//[^"]+"', html):
            bad.append(f"{page.relative_to(site)}: {m.group(0)[:120]}")
    assert not bad, "\n".join(bad[:20])
    diagrams = sorted((DOCS / "assets" / "diagrams").glob("*.svg"))
    assert len(diagrams) >= 7
    for svg in diagrams:
        assert "http" not in svg.read_text(encoding="utf-8").replace("http://www.w3.org/2000/svg", ""), svg.name
    for page in ("migration-study", "powertrip-study", "feasibility", "substrates", "nodes", "power", "network"):
        assert f"assets/diagrams/{page}.svg" in (DOCS / "concepts" / f"{page}.md").read_text(encoding="utf-8"), page


def test_readme_is_short_and_keeps_the_two_commands():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200, f"README.md has {len(text.splitlines())} lines (at most 200)"
    assert "bash scripts/setup.sh" in text and "bash scripts/test.sh" in text
    assert "mkdocs serve" in text and "mkdocs build" in text
    for target in re.findall(r"\]\(((?:docs/)[^)#]+)", text):
        assert (ROOT / target).exists(), f"README links to {target}, which does not exist"


def test_docs_stand_alone():
    """The README and the pages name no internal tooling or folders outside the repository."""
    for path in [README, *DOCS.rglob("*.md")]:
        text = path.read_text(encoding="utf-8")
        assert "../shared" not in text and "shared/" not in text.replace("shared/ ", ""), path


def test_setup_installs_the_docs_tooling():
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    dev = re.search(r"^dev = \[(.*?)\]\s*(#.*)?$", pyproject, re.S | re.M).group(1)
    for package in ("mkdocs", "mkdocs-material", "mkdocstrings[python]"):
        assert f'"{package}' in dev, package
    assert "[dev," in (ROOT / "scripts" / "setup.sh").read_text(encoding="utf-8")
    assert json.dumps(_config()["hooks"]) == json.dumps(["scripts/mkdocs_hooks.py"])


def _unknown_fields(schema: dict, node, value, path: str) -> list[str]:
    """The keys of a YAML example that the scenario schema does not know, as dotted paths."""
    while isinstance(node, dict) and "$ref" in node:
        node = schema["$defs"][node["$ref"].rsplit("/", 1)[-1]]
    if not isinstance(node, dict):
        return []
    for key in ("anyOf", "oneOf"):
        if key in node:
            results = [_unknown_fields(schema, branch, value, path) for branch in node[key]]
            return [] if any(not r for r in results) else min(results, key=len)
    if isinstance(value, dict):
        if "class" in value and path.startswith(".policies["):
            return []  # a user's policy class: its parameters are its own Params model's
        props, extra = node.get("properties", {}), node.get("additionalProperties", True)
        out = []
        for key, item in value.items():
            if key in props:
                out += _unknown_fields(schema, props[key], item, f"{path}.{key}")
            elif isinstance(extra, dict):
                out += _unknown_fields(schema, extra, item, f"{path}.{key}")
            elif extra is False:
                out.append(f"{path}.{key}")
        return out
    if isinstance(value, list) and node.get("type") == "array":
        return [bad for i, item in enumerate(value)
                for bad in _unknown_fields(schema, node.get("items", {}), item, f"{path}[{i}]")]
    return []


def test_yaml_examples_use_only_schema_fields():
    """Every scenario example or fragment in the pages (not sweep files) names only fields of the
    scenario schema, so renaming a field fails here until the documentation follows."""
    from test_doc_examples import blocks

    from testbed.cli.cmd_schema import json_schema

    schema = json_schema()
    checked, bad = 0, []
    for page in sorted([README, *DOCS.rglob("*.md")]):
        if page.name == "outputs.md":
            continue
        for lang, code in blocks(str(page.relative_to(ROOT))):
            if lang != "yaml":
                continue
            data = yaml.safe_load(code)
            if not isinstance(data, dict) or "scenario" in data:  # a sweep file
                continue
            checked += 1
            bad += [f"{page.relative_to(ROOT)}: {p}" for p in _unknown_fields(schema, schema, data, "")]
    assert checked >= 8
    assert not bad, "fields the scenario schema does not know:\n" + "\n".join(bad)


def test_documented_flags_exist():
    """Every ``--flag`` written after a ``testbed COMMAND`` in the README and the pages (code blocks,
    inline code, tables) is an option of that command in the parser, so a renamed flag fails here."""
    import argparse

    from testbed.cli import build_parser

    def walk(parser, prefix=()):
        yield prefix, parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from walk(sub, prefix + (name,))

    commands = dict(walk(build_parser()))
    flags = {path: {s for a in sub._actions for s in a.option_strings} for path, sub in commands.items()}
    mention = re.compile(r"(?:^|[\s`(])(?:sudo )?(?:\.venv/bin/)?testbed ((?:[a-z][a-z-]* ?)+)([^`\n]*)", re.M)
    bad, seen = [], 0
    for page in [README, *sorted(DOCS.rglob("*.md"))]:
        for m in mention.finditer(page.read_text(encoding="utf-8")):
            words, path = m.group(1).split(), ()
            for word in words:
                if path + (word,) not in commands:
                    break
                path += (word,)
            if not path:
                continue
            seen += 1
            rest = (" ".join(words[len(path):]) + " " + m.group(2)).split("#")[0].split(" -- ")[0]
            for flag in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", rest):
                if flag not in flags[path] | flags[()]:
                    bad.append(f"{page.relative_to(ROOT)}: testbed {' '.join(path)} {flag}")
    assert seen >= 100
    assert not bad, "flags the parser does not have:\n" + "\n".join(sorted(set(bad)))


def test_commands_at_a_glance_names_every_command():
    """The hand-written overview (reference/commands.md) keeps up with the parser: every command and
    sub-command has a line there, beside the generated reference."""
    text = (DOCS / "reference" / "commands.md").read_text(encoding="utf-8")
    missing = [c for c in _hooks().commands() if f"`{c}" not in text]
    assert not missing, f"commands missing from docs/reference/commands.md: {missing}"
