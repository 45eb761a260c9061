"""Plug-ins of every kind, from a scenario or from an installed package.

Whatever registers itself on import (a migration or selection policy, a trace kind, a grid signal, a
power backend, a substrate, a kind of nodes, a workload) is a plug-in once something imports it. Two
ways to have it imported:

- a scenario's ``plugins:``, a list of module names (``my_lab.traces``, found on ``sys.path``, then
  beside the scenario and in the working directory) or ``.py`` files (relative to the scenario's
  folder), imported before the scenario is validated, so that the rest of the same file can name
  what they register. The resolved scenario (the results' ``scenario.yaml``) keeps files as absolute
  paths, so a run's copy loads again from anywhere;
- an installed package's entry points in the group ``testbed.plugins``
  (:func:`testbed.registry.load_installed_plugins`), imported once before any scenario is read and
  before the command line's choices are listed: ``pip install my-lab-testbed`` is then enough.

Importing a plug-in runs its code, as importing any Python module does: list only code you trust.
"""

from __future__ import annotations

import re
from pathlib import Path

from testbed.errors import SpecError
from testbed.registry import load_installed_plugins, reason

_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def import_plugins(data: dict, base_dir: Path) -> dict:
    """Import the scenario's ``plugins`` (see the module doc) and return ``data`` with each file's path
    made absolute. Every entry that cannot be imported is one problem naming ``plugins[i]``."""
    from testbed.spec.plugins import import_plugin_file, import_plugin_module

    load_installed_plugins()
    plugins = data.get("plugins") if isinstance(data, dict) else None
    if plugins is None:
        return data
    if not isinstance(plugins, list):
        raise SpecError([("plugins", "a list of module names (my_lab.traces) or .py files (relative to the scenario)")])
    resolved: list[object] = []
    problems: list[tuple[str, str]] = []
    for i, ref in enumerate(plugins):
        where = f"plugins[{i}]"
        if not isinstance(ref, str) or not ref.strip():
            problems.append((where, "a module name (my_lab.traces) or a .py file, as a string"))
            resolved.append(ref)
            continue
        ref = ref.strip()
        try:
            if ref.endswith(".py") or "/" in ref:
                path = Path(ref).expanduser()
                path = (path if path.is_absolute() else base_dir / path).resolve()
                if not path.is_file():
                    problems.append((where, f"file not found: {ref} (relative paths start at the scenario's folder)"))
                    resolved.append(ref)
                    continue
                import_plugin_file(path)
                resolved.append(str(path))
            elif _MODULE.match(ref):
                import_plugin_module(ref, [base_dir, Path.cwd()])
                resolved.append(ref)
            else:
                problems.append((where, f"not a module name nor a .py file: {ref[:80]!r}"))
                resolved.append(ref)
        except Exception as e:  # noqa: BLE001 - whatever the plug-in raises while importing is its problem
            problems.append((where, f"cannot import {ref[:80]!r}: {reason(e)}"))
            resolved.append(ref)
    if problems:
        raise SpecError(problems)
    return {**data, "plugins": resolved}
