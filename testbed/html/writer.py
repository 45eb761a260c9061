"""Where runs and sweeps write their ``index.html``: one call each (testbed/runner.py,
testbed/sweep/runner.py). A page that cannot be drawn never costs the results: the failure is said
on stderr and in a page of its own, and every table stays where it was written."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

from testbed.html import INDEX
from testbed.html.document import esc, page, write_atomic


def _write(folder: Path, build: Callable[[], str], what: str) -> Path:
    try:
        text = build()
    except Exception as e:  # noqa: BLE001 - the results are written; the page says what went wrong
        print(f"warning: {folder / INDEX}: the {what} page could not be drawn ({type(e).__name__}: {e}); "
              "its tables are in the directory", file=sys.stderr)
        text = page(f"{what} results", f"<h1>{esc(what.capitalize())} results</h1><p class=\"note\">This page could not "
                                       f"be drawn: {esc(type(e).__name__)}: {esc(e)}. The results' tables are in this "
                                       "directory.</p>")
    return write_atomic(Path(folder) / INDEX, text)


def write_run_page(run: Path, *, plots: bool = True) -> Path:
    from testbed.html import run_page

    return _write(run, lambda: run_page.build(run, plots=plots), "run")


def write_sweep_page(sweep: Path, argv: list[str] | None = None) -> Path:
    from testbed.html import sweep_page

    return _write(sweep, lambda: sweep_page.build(sweep, argv=argv), "sweep")
