"""Every code block of the README and of every page under docs/ runs (or parses) as the page shows it.

Per page, in order, in one fresh folder (the repository's scenarios/, sweeps/, topologies/, traces/ and
examples/ linked into it, `testbed` first on PATH); a ``testbed`` command already run on the page is
not run again (the Measured pages repeat a sweep under each of its figures, and rule 2 below can make
an emulated run the sim run beside it; ``--substrate sim`` is ``testbed run``'s default):

- a ```` ```bash ```` / ```` ```sh ```` block runs under ``bash -e``, in its *sim form* (below);
- a ```` ```python ```` block runs in a fresh interpreter;
- a block whose first line is ``# file: NAME`` (a YAML scenario or sweep, a matplotlib style, ...) is
  written to NAME first, so later blocks use the file exactly as the page shows it; other YAML blocks
  are fragments and only have to parse; text, TOML and output blocks are not run.

**The sim form of a shell block.** The tests run unprivileged on the simulator, so a shell block is
run after these mechanical rewrites, line by line (:func:`sim_form`; a block they change is counted as
*derived*, the rest run exactly as written):

1. ``sudo`` is dropped, and ``.venv/bin/testbed`` is ``testbed`` (the venv's, first on PATH);
2. ``--substrate netns`` / ``mininet`` / ``auto`` becomes ``--substrate sim``, and a ``testbed run`` or
   ``testbed sweep`` that ran under ``sudo`` without ``--substrate`` gets ``--substrate sim`` (root
   meant emulation; the sim runs the same scenario);
3. a ``testbed sweep SWEEP ... --out results/reference-work/...`` (a sweep of the reference results:
   10 seeds per cell, minutes to an hour) becomes ``testbed validate SWEEP``, which checks the sweep
   file, its scenario and the overrides of every trial and runs nothing; a block of such lines only
   is validated together with the page's others, in one call at the page's end;
4. ``xdg-open FILE`` (a browser) becomes ``test -s FILE``.

**The marker.** A block whose first line is ``# not run in tests: REASON`` is skipped (a reason is
required): it needs root and network namespaces with no sim form (``testbed net``), a GPU, a Ray
cluster, Vagrant or a qemu guest, real training under a throttle, or it regenerates the reference
results. Keep it rare: every such block is listed by ``test_skipped_blocks_say_why``, which also
bounds their number. Everything else must exit 0.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
# every page with code blocks; docs/outputs.md is generated from the code and shows none, and the
# generated reference pages (reference/cli.md, ...) are written at build time, not kept under docs/
PAGES = ["README.md"] + sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md")
                               if p.name != "outputs.md")
SKIP = "# not run in tests:"
FILE = "# file:"
LINKED = ("scenarios", "sweeps", "topologies", "traces", "examples")
SHELL = ("bash", "sh", "shell")
MAX_SKIPPED = 28  # see test_skipped_blocks_say_why (28: testbed bench emulation, root and live substrates, minutes)
FENCE = re.compile(r"^(?P<indent>[ ]*)```(?P<lang>[A-Za-z0-9_+-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```[ ]*$", re.M | re.S)


def blocks(page: str) -> list[tuple[str, str]]:
    """(language, code) of every fenced block of a page, in order, dedented to its fence."""
    out = []
    for m in FENCE.finditer((ROOT / page).read_text(encoding="utf-8")):
        indent = len(m.group("indent"))
        body = "\n".join(line[indent:] for line in m.group("body").splitlines())
        out.append((m.group("lang").lower(), body))
    return out


def _first_line(code: str) -> str:
    return next((line.strip() for line in code.splitlines() if line.strip()), "")


def _add_flag(line: str, flag: str) -> str:
    """``line`` with ``flag`` after its command, before a trailing ``# comment``."""
    cmd, sep, comment = line.partition(" #")
    return f"{cmd.rstrip()} {flag}" + (f"  #{comment}" if sep else "")


def sim_form(code: str) -> str:
    """A shell block as the tests run it: the rules of the module docstring, line by line."""
    out = []
    for line in code.splitlines():
        sudo = re.search(r"(^|[;&|]\s*)sudo (?:-E )?", line) is not None
        line = re.sub(r"(^|[;&|]\s*)sudo (?:-E )?", r"\1", line)
        line = re.sub(r"(?<![\w/.])\.venv/bin/testbed\b", "testbed", line)
        line = re.sub(r"--substrate[ =](?:netns|mininet|auto)\b", "--substrate sim", line)
        command = line.split(" #")[0]
        if sudo and re.search(r"\btestbed (run|sweep)\b", command) and "--substrate" not in command:
            line = _add_flag(line, "--substrate sim")
        sweep = re.search(r"\btestbed sweep (\S+)", command)
        if sweep and "--out results/reference-work/" in command:
            line = f"testbed validate {sweep.group(1)}"
        line = re.sub(r"\bxdg-open ", "test -s ", line)
        out.append(line)
    return "\n".join(out)


def _runs(page: str) -> list[tuple[str, str]]:
    """The blocks of a page that run (shell blocks in their sim form), in order, with the file blocks."""
    out, seen = [], set()
    for lang, code in blocks(page):
        if _first_line(code).startswith(SKIP):
            continue
        if lang in SHELL:
            lines = []
            for line in sim_form(code).splitlines():
                command = line.split(" #")[0].strip()
                if command.startswith("testbed run "):  # sim is its default substrate
                    command = re.sub(r" --substrate sim\b", "", command)
                if command.startswith("testbed ") and command in seen:
                    continue  # the same command already ran on this page (rule 2 can make two lines one)
                seen.add(command)
                lines.append(line)
            code = "\n".join(lines)
            if not [line for line in lines if line.split("#")[0].strip()]:
                continue
        elif lang == "python" and (lang, code) in out:
            continue
        out.append((lang, code))
    return out


def test_skipped_blocks_say_why():
    """Every skipped block names its reason, and there are few of them (all listed on failure)."""
    skipped, derived, ran = [], 0, 0
    for page in PAGES:
        for lang, code in blocks(page):
            assert lang in (*SHELL, "python", "yaml", "text", "toml", ""), f"{page}: a ```{lang} block: run it or say text"
            first = _first_line(code)
            if first.startswith(SKIP):
                assert first[len(SKIP):].strip(), f"{page}: '{SKIP}' needs a reason"
                skipped.append(f"{page}: {first}")
            elif lang in SHELL:
                derived += sim_form(code) != code
                ran += sim_form(code) == code
            elif lang == "python":
                ran += 1
    # root with no sim form, a GPU, Ray, Vagrant/qemu, a whole machine's set-up, the reference results'
    # regeneration: raise this only with a reason on the page
    assert len(skipped) <= MAX_SKIPPED, f"{len(skipped)} skipped blocks:\n" + "\n".join(skipped)
    assert ran + derived >= 40, (ran, derived)


def test_sim_form_rules():
    assert sim_form("sudo .venv/bin/testbed run s.yaml --substrate netns   # root") == \
        "testbed run s.yaml --substrate sim   # root"
    assert sim_form("sudo .venv/bin/testbed sweep sweeps/x.yaml --out results/reference-work/x") == \
        "testbed validate sweeps/x.yaml"
    assert sim_form("testbed sweep sweeps/x.yaml --out results/sw --parallel 2") == \
        "testbed sweep sweeps/x.yaml --out results/sw --parallel 2"
    assert sim_form("xdg-open results/qs/index.html") == "test -s results/qs/index.html"


def _setup(folder: Path) -> None:
    for name in LINKED:
        (folder / name).symlink_to(ROOT / name)


def _is_heavy(page: str) -> bool:
    return any(lang in (*SHELL, "python") for lang, _ in _runs(page))


@pytest.mark.parametrize("page", [p if not _is_heavy(p) else pytest.param(p, marks=pytest.mark.slow)
                                  for p in PAGES])
def test_page_blocks_run(page, tmp_path):
    runnable = _runs(page)
    if any(lang in (*SHELL, "python") for lang, _ in runnable):
        _setup(tmp_path)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "MPLBACKEND": "Agg"}
    env.pop("PYTHONPATH", None)
    validate = []
    for lang, code in runnable:
        first = _first_line(code)
        if first.startswith(FILE):
            name = first[len(FILE):].strip()
            assert name.split("/")[0] not in (*LINKED, "results"), f"{page}: '{FILE} {name}' would write into the repository"
            if lang == "yaml":
                yaml.safe_load(code)
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name).write_text(code + "\n", encoding="utf-8")
            continue
        if lang == "yaml":
            assert yaml.safe_load(code) is not None
            continue
        lines = [line.split(" #")[0].strip() for line in code.splitlines()]
        lines = [line for line in lines if line and not line.startswith("#")]
        if lang in SHELL and all(line.startswith("testbed validate ") for line in lines):
            validate += [word for line in lines for word in line.split()[2:]]
            continue
        if lang in SHELL:
            cmd = ["bash", "-e", "-c", code]
        elif lang == "python":
            cmd = [sys.executable, "-c", code]
        else:
            continue
        _run(page, lang, code, cmd, tmp_path, env)
    if validate:
        code = "testbed validate " + " ".join(dict.fromkeys(validate))
        _run(page, "bash", code, ["bash", "-e", "-c", code], tmp_path, env)


def _run(page, lang, code, cmd, folder, env):
    proc = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (f"{page}: this {lang} block exited {proc.returncode}:\n{code}\n"
                                  f"--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-3000:]}")
