"""MkDocs hooks (``hooks:`` in mkdocs.yml): the reference pages that are generated from the code at
build time, so they cannot drift from it, and the committed reference results' figures.

- ``reference/scenario-fields.md``: every field of scenario files, from the JSON Schema that
  ``testbed schema`` prints (:func:`testbed.cli.cmd_schema.json_schema`);
- ``reference/topology-fields.md``: the same for topology files (``testbed schema --topology``);
- ``reference/cli.md``: every command, sub-command and option, from the argparse parser the
  ``testbed`` executable uses (:func:`testbed.cli.build_parser`);
- ``measured/report-migration.md`` and ``measured/report-powertrip.md``: the committed reference
  reports (``results/reference/*/report.md``) as they are, with their figures, which are copied into
  the site under ``reference-results/`` (they are not duplicated under ``docs/``).

``tests/unit/test_docs_site.py`` builds the site with ``--strict`` and checks these pages against the
schema and the parser. The functions here are plain Python, usable without MkDocs.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "results" / "reference"
REPORTS = {"report": "measured/report-migration.md", "report-powertrip": "measured/report-powertrip.md"}
FIGURES_URI = "reference-results"


# --------------------------------------------------------------------------- scenario fields

def _text(text: Any) -> str:
    """Plain text from the code (descriptions, help) as Markdown: ``<name>`` stays visible."""
    return str(text).replace("<", "&lt;").replace(">", "&gt;")


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ").strip()


def _anchor(name: str) -> str:
    return "def-" + re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def _type(prop: dict) -> str:
    """A field's type in words, with links to the sections of nested models."""
    if "$ref" in prop:
        name = prop["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{_anchor(name)})"
    if "const" in prop:
        return f"`{json.dumps(prop['const'])}`"
    if "enum" in prop:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in prop["enum"])
    for key in ("anyOf", "oneOf", "allOf"):
        if key in prop:
            return " or ".join(_type(p) for p in prop[key])
    t = prop.get("type")
    if t == "array":
        items = prop.get("items")
        if isinstance(items, dict) and items:
            return f"list of {_type(items)}"
        if "prefixItems" in prop:
            return "[" + ", ".join(_type(p) for p in prop["prefixItems"]) + "]"
        return "list"
    if t == "object":
        extra = prop.get("additionalProperties")
        if isinstance(extra, dict) and extra:
            return f"map of {_type(extra)}"
        return "mapping"
    if isinstance(t, list):
        return " or ".join(t)
    return t or "any"


_CONSTRAINTS = (("minimum", "≥"), ("exclusiveMinimum", ">"), ("maximum", "≤"), ("exclusiveMaximum", "<"),
                ("minLength", "min length"), ("maxLength", "max length"), ("minItems", "min items"),
                ("maxItems", "max items"), ("pattern", "pattern"))


def _constraint(word: str, value: Any) -> str:
    return f"{word} `{value}`" if word == "pattern" else f"{word} {value}"


def _constraints(prop: dict) -> str:
    out = [_constraint(word, prop[key]) for key, word in _CONSTRAINTS if key in prop]
    for key in ("anyOf", "oneOf"):
        for p in prop.get(key, []):
            out += [_constraint(word, p[k]) for k, word in _CONSTRAINTS if k in p]
    return ", ".join(out)


def _fields_table(model: dict) -> list[str]:
    props = model.get("properties", {})
    if not props:
        return ["(no fields of its own)", ""]
    required = set(model.get("required", []))
    lines = ["| field | type | default | constraints | description |", "|---|---|---|---|---|"]
    for name, prop in props.items():
        if name in required:
            default = "**required**"
        elif "default" in prop:
            default = f"`{json.dumps(prop['default'], sort_keys=True)}`"
        else:
            default = ""
        lines.append(f"| `{name}` | {_cell(_type(prop))} | {_cell(default)} | {_cell(_constraints(prop))} "
                     f"| {_cell(_text(prop.get('description', '')))} |")
    return lines + [""]


def schema_markdown(schema: dict, *, title: str, command: str, intro: str) -> str:
    """One page: the top-level fields, then one section per nested model (``$defs``), each a table
    of its fields with type, default, constraints and description."""
    lines = [f"# {title}", "",
             "<!-- generated at build time by scripts/mkdocs_hooks.py from the code: do not edit -->", "",
             intro, "",
             f"Generated from the JSON Schema that `{command}` prints, when the site is built, so it is "
             "the schema of the code it was built from. Unknown fields are errors in every block.", "",
             f"## {schema.get('title', 'Top level')} (the file's top level)", ""]
    if schema.get("description"):
        lines += [_text(schema["description"]), ""]
    lines += _fields_table(schema)
    for name in sorted(schema.get("$defs", {})):
        model = schema["$defs"][name]
        lines += [f"## {name} {{ #{_anchor(name)} }}", ""]
        if model.get("description"):
            lines += [_text(model["description"]), ""]
        if "properties" not in model and "enum" in model:
            lines += ["One of: " + ", ".join(f"`{json.dumps(v)}`" for v in model["enum"]), ""]
            continue
        lines += _fields_table(model)
    return "\n".join(lines) + "\n"


def schema_fields(schema: dict) -> list[tuple[str, str]]:
    """Every (model, field) of a schema: what the generated page must name (the test's list)."""
    out = [(schema.get("title", "Top level"), f) for f in schema.get("properties", {})]
    for name, model in schema.get("$defs", {}).items():
        out += [(name, f) for f in model.get("properties", {})]
    return out


def scenario_page() -> str:
    from testbed.cli.cmd_schema import json_schema

    return schema_markdown(
        json_schema(), title="Scenario fields", command="testbed schema",
        intro="Every field a scenario file may hold. [Scenario files](scenario-files.md) shows a commented "
              "example; [the shipped scenarios](../scenarios.md) say why each value was chosen.")


def topology_page() -> str:
    from testbed.cli.cmd_schema import json_schema

    return schema_markdown(
        json_schema(topology=True), title="Topology fields", command="testbed schema --topology",
        intro="A topology file (`topologies/*.yaml`, or `topology:` in a scenario) holds sites and links only.")


# --------------------------------------------------------------------------- command line

def _subparsers(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                out.append((name, helps.get(name) or "", sub))
    return out


def commands(parser: argparse.ArgumentParser | None = None, prefix: str = "testbed") -> list[str]:
    """Every command path (``testbed net up``, ...): what the generated CLI page must name."""
    if parser is None:
        from testbed.cli import build_parser

        parser = build_parser()
    out = []
    for name, _, sub in _subparsers(parser):
        out.append(f"{prefix} {name}")
        out += commands(sub, f"{prefix} {name}")
    return out


def _options_table(parser: argparse.ArgumentParser) -> list[str]:
    rows = []
    for a in parser._actions:
        if isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)) or a.help == argparse.SUPPRESS:
            continue
        name = ", ".join(f"`{s}`" for s in a.option_strings) if a.option_strings else f"`{a.metavar or a.dest}`"
        if a.option_strings and a.nargs != 0:
            name += f" `{a.metavar or a.dest.upper()}`" if not isinstance(a.metavar, tuple) else ""
        help_text = (a.help or "") % {"default": a.default, "prog": parser.prog, "dest": a.dest,
                                        "choices": a.choices} if a.help and "%(" in a.help else (a.help or "")
        help_text = help_text.replace("%%", "%")
        extra = []
        if a.choices is not None and not isinstance(a.choices, dict):
            extra.append("choices: " + ", ".join(f"`{c}`" for c in a.choices))
        if a.option_strings and a.default not in (None, False, argparse.SUPPRESS) and a.nargs != 0:
            extra.append(f"default: `{a.default}`")
        if a.required and a.option_strings:
            extra.append("required")
        rows.append(f"| {name} | {_cell(_text(help_text))} | {_cell('; '.join(extra))} |")
    if not rows:
        return []
    return ["| argument | what it does | |", "|---|---|---|", *rows, ""]


def _command_section(name: str, help_text: str, parser: argparse.ArgumentParser, level: int) -> list[str]:
    lines = [f"{'#' * level} `{parser.prog}`", ""]
    if help_text:
        lines += [_cell(_text(help_text.replace("%%", "%"))), ""]
    if parser.description:
        lines += [_text(parser.description), ""]
    lines += ["```text", parser.format_usage().strip(), "```", ""]
    lines += _options_table(parser)
    if parser.epilog:
        lines += ["```text", parser.epilog.strip(), "```", ""]
    for sub_name, sub_help, sub in _subparsers(parser):
        lines += _command_section(sub_name, sub_help, sub, min(level + 1, 4))
    return lines


def cli_page() -> str:
    from testbed.cli import build_parser

    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"  # argparse wraps usage lines at the terminal's width
    try:
        parser = build_parser()
        lines = ["# Command line", "",
                 "<!-- generated at build time by scripts/mkdocs_hooks.py from the code: do not edit -->", "",
                 "Every command, sub-command and option of `testbed`, generated from the argparse parser "
                 "the executable uses (`testbed/cli/`) when the site is built. "
                 "[Commands at a glance](commands.md) says what each does in more words, with examples. "
                 "`testbed COMMAND --help` prints the same.", "",
                 "```text", parser.format_usage().strip(), "```", ""]
        lines += _options_table(parser)
        for name, help_text, sub in _subparsers(parser):
            lines += _command_section(name, help_text, sub, 2)
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- reference reports

def report_page(folder: str) -> str | None:
    """A committed reference report's report.md, its figures pointed at their copies in the site."""
    src = REFERENCE / folder / "report.md"
    if not src.is_file():
        return None
    text = src.read_text(encoding="utf-8")
    text = re.sub(r"\]\(([^)/:#]+\.png)\)", lambda m: f"](../{FIGURES_URI}/{folder}/{m.group(1)})", text)
    head = (f"<!-- results/reference/{folder}/report.md, copied into the site at build time by "
            "scripts/mkdocs_hooks.py: do not edit -->\n\n"
            f"!!! note \"The committed report, as `bash scripts/reference.sh` wrote it\"\n"
            f"    This page is `results/reference/{folder}/report.md` at the commit the site was built from. "
            f"`testbed report --check results/reference` re-derives every table and verdict in it from its "
            f"`data/` folder; [Reference results](../reference.md) says how it is made.\n\n")
    return head + text


def report_figures() -> list[tuple[str, Path]]:
    """(site path, file) for every figure of the committed reference reports."""
    out = []
    for folder in REPORTS:
        d = REFERENCE / folder
        if d.is_dir():
            out += [(f"{FIGURES_URI}/{folder}/{p.name}", p) for p in sorted(d.glob("*.png"))]
    return out


def generated_pages() -> dict[str, str]:
    pages = {"reference/scenario-fields.md": scenario_page(),
             "reference/topology-fields.md": topology_page(),
             "reference/cli.md": cli_page()}
    for folder, uri in REPORTS.items():
        text = report_page(folder)
        if text is not None:
            pages[uri] = text
    return pages


# --------------------------------------------------------------------------- MkDocs events

def on_files(files, config):  # noqa: ANN001 (MkDocs' hook signature)
    from mkdocs.structure.files import File

    for uri, text in generated_pages().items():
        if files.get_file_from_path(uri) is None:
            files.append(File.generated(config, uri, content=text))
    for uri, path in report_figures():
        files.append(File.generated(config, uri, abs_src_path=str(path)))
    return files


_ROLE = re.compile(r":(?:class|func|mod|meth|attr|data|exc|obj):(<code>)~?")


def on_page_content(html, page, config, files):  # noqa: ANN001 (MkDocs' hook signature)
    """Docstrings use Sphinx roles (``:class:`~x.Y```); the Python API page shows them as code."""
    return _ROLE.sub(r"\1", html) if ":" in html else html
