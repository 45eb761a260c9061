"""index.html of a sim run and of a sim sweep in a real browser: headless Chromium (Debian's
``chromium``, scripts/setup.sh installs it) driven over the DevTools protocol
(tests/unit/html/chromium_support.py). Each page renders with no console error and no request leaving the
file; the screenshots stay under pytest's tmp dir (``TESTBED_REPORT_SCREENSHOT=PATH`` also copies the
run's there, e.g. docs/img/report.png)."""

from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path

import pytest

import testbed
from tests.conftest import small_scenario_dict
from tests.unit.html.chromium_support import chromium, visit

pytestmark = pytest.mark.skipif(chromium() is None, reason="no Chromium (apt-get install chromium; scripts/setup.sh)")


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def _check(page: Path, shot: Path, min_images: int) -> None:
    seen = visit(page, max_height=2600)
    shot.write_bytes(seen.screenshot)
    assert seen.errors == []
    assert seen.requests == []  # nothing fetched: no script, font, stylesheet or image from anywhere
    assert seen.tables >= 1 and seen.images >= min_images  # every embedded figure decoded
    width, height = _png_size(seen.screenshot)
    assert width == 1280 and height == min(seen.height, 2600)


def test_run_page_in_chromium(tmp_path):
    run = testbed.run(small_scenario_dict(), out=tmp_path / "run", progress=False).path
    shot = tmp_path / "run.png"
    _check(run / "index.html", shot, min_images=5)
    if os.environ.get("TESTBED_REPORT_SCREENSHOT"):
        shutil.copyfile(shot, os.environ["TESTBED_REPORT_SCREENSHOT"])


def test_sweep_page_in_chromium(tmp_path):
    table = testbed.sweep(small_scenario_dict(), tmp_path / "sweep", grid={"feasibility.alpha": [0.05, 0.2]}, seeds=2,
                          parallel=1)
    _check(Path(table.attrs["path"]) / "index.html", tmp_path / "sweep.png", min_images=3)


def test_a_page_that_fetches_is_caught(tmp_path):
    """The check itself: a page that asks for a remote image and logs an error fails it."""
    page = tmp_path / "bad.html"
    page.write_text('<!DOCTYPE html><html><body><table></table><img src="http://127.0.0.1:9/x.png">'
                    "<script>console.error('boom')</script></body></html>")
    seen = visit(page)
    assert any("boom" in e for e in seen.errors)
    assert seen.requests == ["http://127.0.0.1:9/x.png"]
