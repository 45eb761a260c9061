"""The code blocks of the README, the Get started pages and the feasibility model's page run as written.

Per page, in order, in one fresh folder (the repository's scenarios/, sweeps/, topologies/, traces/ and
examples/ linked into it, `testbed` first on PATH):

- a ```` ```bash ```` / ```` ```sh ```` block runs under ``bash -e``;
- a ```` ```python ```` block runs in a fresh interpreter;
- a ```` ```yaml ```` block whose first line is ``# file: NAME`` is written to NAME first (the tutorial's
  scenario and sweep), so later blocks use the file exactly as the page shows it; other YAML blocks
  are fragments and only have to parse.

**The marker.** A block whose first line is ``# not run in tests: REASON`` is skipped (a reason is
required): it needs root, network namespaces, a GPU, a Ray cluster, or it sets up a whole machine.
Keep it rare: every such block is listed by ``test_skipped_blocks_say_why``. Everything else must
exit 0 on the simulator without privileges.
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
PAGES = ["README.md", "docs/index.md", "docs/get-started/install.md", "docs/get-started/quickstart.md",
         "docs/get-started/tutorial.md", "docs/concepts/feasibility.md"]
SKIP = "# not run in tests:"
FILE = "# file:"
LINKED = ("scenarios", "sweeps", "topologies", "traces", "examples")
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


def test_skipped_blocks_say_why():
    skipped = []
    for page in PAGES:
        for lang, code in blocks(page):
            first = _first_line(code)
            if first.startswith(SKIP):
                assert first[len(SKIP):].strip(), f"{page}: '{SKIP}' needs a reason"
                skipped.append(f"{page}: {first}")
    # rare by design: root / a machine set-up / a server; raise this only with a reason on the page
    assert len(skipped) <= 10, "\n".join(skipped)


@pytest.mark.slow  # the tutorial runs a 9-trial sweep: about 1-2 min on 2 busy cores
@pytest.mark.parametrize("page", PAGES)
def test_page_blocks_run(page, tmp_path):
    runnable = [(lang, code) for lang, code in blocks(page) if not _first_line(code).startswith(SKIP)]
    for name in LINKED:
        (tmp_path / name).symlink_to(ROOT / name)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "MPLBACKEND": "Agg"}
    env.pop("PYTHONPATH", None)
    for lang, code in runnable:
        if lang == "yaml":
            data = yaml.safe_load(code)
            first = _first_line(code)
            if first.startswith(FILE):
                (tmp_path / first[len(FILE):].strip()).write_text(code + "\n", encoding="utf-8")
            else:
                assert data is not None
            continue
        if lang in ("bash", "sh", "shell"):
            cmd = ["bash", "-e", "-c", code]
        elif lang == "python":
            cmd = [sys.executable, "-c", code]
        else:
            continue
        proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, (f"{page}: this {lang} block exited {proc.returncode}:\n{code}\n"
                                      f"--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-3000:]}")
