"""index.html of runs and sweeps (testbed/html): self-contained, in every results directory, with
the figures in the format asked for; the live page's writer; the figure format and style options."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import pytest

import testbed
from testbed.analysis.figures import check_format, check_style, figure_output
from testbed.errors import SpecError
from testbed.html.document import write_atomic
from testbed.html.live import LivePage, live_page
from testbed.html.markdown import to_html
from testbed.html.site_map import site_coords
from tests.conftest import small_scenario_dict

EXTERNAL = re.compile(r"""(?:src|href)\s*=\s*["']?(?!data:|#)[a-z]+:""", re.I)


def _self_contained(text: str) -> None:
    assert "<script" not in text.lower()
    assert not EXTERNAL.search(text), EXTERNAL.search(text).group(0)
    assert "http://" not in text and "https://" not in text


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return testbed.run(small_scenario_dict(), out=tmp_path_factory.mktemp("html") / "run", progress=False).path


def test_run_page_is_one_self_contained_file(run_dir):
    text = (run_dir / "index.html").read_text(encoding="utf-8")
    _self_contained(text)
    assert 'http-equiv="refresh"' not in text  # the final page does not reload
    assert "<table>" in text and "feasibility_aware" in text
    assert text.count('<img src="data:image/png;base64,') >= 5  # energy, JCT, map, timelines, mix, caps
    for section in ("Comparison", "Migrations on a map", "Predicted vs realised migration time", "Per-site timelines",
                    "Energy mix per site", "Power caps"):
        assert f">{section}</h2>" in text
    for name in ("site_map.png", "site_timelines.png"):
        assert (run_dir / name).is_file()


def test_figure_titles_name_no_scenario(run_dir, tmp_path):
    """The scenario's name ("small") is in the page's header, never in a figure's title: the figures
    say what they show (checked on svg, whose text is searchable)."""
    with figure_output("svg"):
        out = testbed.run(small_scenario_dict(name="zzscenario"), out=tmp_path / "svg", progress=False).path
    svgs = list(out.rglob("*.svg"))
    assert len(svgs) >= 6 and not list(out.rglob("*.png"))
    for svg in svgs:
        assert "zzscenario" not in svg.read_text(encoding="utf-8"), svg
    text = (out / "index.html").read_text(encoding="utf-8")
    assert "zzscenario" in text and text.count("data:image/svg+xml;base64,") >= 6


def test_pdf_figures_are_shown_through_an_svg_copy(tmp_path):
    with figure_output("pdf"):
        out = testbed.run(small_scenario_dict(), out=tmp_path / "pdf", progress=False).path
    assert (out / "jct_cdf.pdf").read_bytes().startswith(b"%PDF")
    assert not list(out.rglob("*.png")) and not list(out.rglob("*.svg"))
    text = (out / "index.html").read_text(encoding="utf-8")
    assert text.count("data:image/svg+xml;base64,") >= 6


def test_no_plots_run_page_has_the_tables(tmp_path):
    out = testbed.run(small_scenario_dict(), out=tmp_path / "np", progress=False, plots=False).path
    text = (out / "index.html").read_text(encoding="utf-8")
    _self_contained(text)
    assert "<table>" in text and "<img" not in text and "--no-plots" in text


def test_federated_run_page(tmp_path):
    from tests.unit.federated_support import tiny

    out = testbed.run(tiny(), out=tmp_path / "fl", progress=False).path
    text = (out / "index.html").read_text(encoding="utf-8")
    _self_contained(text)
    assert "federated (PowerTrip) study" in text
    for section in ("Accuracy over time", "Sites selected", "Energy mix", "Sites on a map", "Per-site timelines"):
        assert f">{section}</h2>" in text
    assert text.count("<img ") >= 6


def test_sweep_page(tmp_path):
    table = testbed.sweep(small_scenario_dict(), tmp_path / "sw", grid={"feasibility.alpha": [0.05, 0.2]}, seeds=2,
                          parallel=1)
    sweep = Path(table.attrs["path"])
    text = (sweep / "index.html").read_text(encoding="utf-8")
    _self_contained(text)
    assert "Statistics table" in text and " ± " in text
    assert (sweep / "report" / "report.md").is_file()
    assert 'id="energy-and-jct-per-policy-at-each-level"' in text  # the by-level panels with CIs
    assert text.count("<img ") >= 3
    for trial in sweep.glob("trials/*/seed-*"):
        assert (trial / "index.html").is_file()


# -- the figure options ---------------------------------------------------------------------------------

def test_figure_format_and_style_are_checked(tmp_path, monkeypatch):
    assert check_format(None) == "png" and check_format("svg") == "svg"
    with pytest.raises(SpecError, match="--figure-format.*'jpg'.*png, svg, pdf"):
        check_format("jpg")
    monkeypatch.setenv("TESTBED_FIGURE_FORMAT", "gif")
    with pytest.raises(SpecError, match="TESTBED_FIGURE_FORMAT"):
        check_format(None)
    with pytest.raises(SpecError, match="--figure-style.*no such file"):
        check_style(str(tmp_path / "missing.mplstyle"))
    style = tmp_path / "paper.mplstyle"
    style.write_text("font.size: 7\naxes.grid: True\n")
    assert check_style(str(style)) == str(style)
    assert check_style("ggplot") == "ggplot"


def test_style_file_applies(tmp_path):
    import matplotlib

    style = tmp_path / "big.mplstyle"
    style.write_text("font.size: 23\n")
    before = matplotlib.rcParams["font.size"]
    with figure_output("png", str(style)):
        assert matplotlib.rcParams["font.size"] == 23
    assert matplotlib.rcParams["font.size"] == before


def test_report_links_name_the_format(run_dir, tmp_path):
    from testbed.analysis.report import build_report
    from testbed.analysis.report_check import check_report

    with figure_output("svg"):
        md = build_report([run_dir], tmp_path / "rep")
    text = md.read_text(encoding="utf-8")
    assert ".svg)" in text and ".png)" not in text
    assert (md.parent / "pred_vs_actual.svg").is_file()
    # re-derived in the format it was made in: report.md is the same (provenance aside: a test's tree is dirty)
    problems = [p for p in check_report(md.parent).problems if "dirty tree" not in p and "several commits" not in p]
    assert problems == []


# -- pieces ---------------------------------------------------------------------------------------------

def test_markdown_subset(tmp_path):
    (tmp_path / "a.png").write_bytes(b"\x89PNG\r\n")
    html = to_html("# T\n\n## Sec `x`\n\ntext **b** [l](http://x)\n\n| a | b |\n|---|--:|\n| 1 | <2> |\n\n- i\n- j\n\n"
                   "![alt](a.png)\n![gone](b.png)\n![up](../a.png)\n", tmp_path, shift=1, skip_title=True)
    assert "<h1" not in html and '<h3 id="sec-x">Sec <code>x</code></h3>' in html
    assert "<strong>b</strong> l</p>" in html and "http" not in html
    assert "<td>&lt;2&gt;</td>" in html and "<li>i</li><li>j</li>" in html
    assert 'src="data:image/png;base64,' in html and html.count("not found") == 2  # never outside the folder


def test_site_coords_without_coordinates_are_laid_out_the_same_every_time():
    xy, note = site_coords([{"name": "b"}, {"name": "a"}, {"name": "c"}])
    assert note and "circle" in note and xy == site_coords([{"name": "c"}, {"name": "a"}, {"name": "b"}])[0]
    xy, note = site_coords([{"name": "rome", "lat_deg": 41.9, "lon_deg": 12.5}])
    assert note is None and xy["rome"][1] == 41.9


# -- the live page --------------------------------------------------------------------------------------

class _Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def test_live_page_progress_and_eta(tmp_path):
    clock = _Clock()
    state = {"step": (0.0, 10.0)}
    live = LivePage(tmp_path / "index.html", "Run: x", ["static", "feasibility_aware"], estimate_s=400.0,
                    progress=lambda: state["step"], clock=clock, interval_s=1.0)
    text = live.render()
    assert "0 %" in text and "ETA 6.7 min (the estimate made before the start)" in text
    assert '<meta http-equiv="refresh" content="1">' in text
    live.started("static")
    clock.t += 20
    state["step"] = (5.0, 10.0)  # half of the first of two runs: a quarter done after 20 s, 60 s to go
    text = live.render()  # at that pace 60 s; the estimate says 380 s: weighted 1/4 : 3/4, 300 s
    assert "25 %" in text and "ETA 5.0 min (the pace so far and the estimate before the start)" in text
    assert "running: <strong>static" in text
    paced = LivePage(tmp_path / "p.html", "Run: x", ["static", "feasibility_aware"], progress=lambda: state["step"],
                     clock=clock, interval_s=1.0)
    paced.started("static")
    clock.t += 20
    assert "ETA 60 s (at the pace so far)" in paced.render()  # no estimate: the pace alone
    live.finished("static", {"grid_kwh": 12.5, "migrations": 0, "label": "static"}, 60.0)
    text = live.render()
    assert "1/2 runs done" in text and "<td>12.5</td>" in text and "static: finished in 60 s" in text
    assert "still to run: feasibility_aware" in text


def test_live_page_is_rewritten_atomically_on_its_interval(tmp_path):
    path = tmp_path / "index.html"
    with live_page(True, path, "Run: x", ["a"], interval_s=0.05) as live:
        live.started("a")
        deadline = time.monotonic() + 10
        while live.writes < 4 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert live.writes >= 4
        assert "running: <strong>a" in path.read_text(encoding="utf-8")
    n = live.writes
    time.sleep(0.2)
    assert live.writes == n  # stopped with the block
    assert [p.name for p in tmp_path.iterdir()] == ["index.html"]  # no temporary file left


def test_write_atomic_never_shows_half_a_page(tmp_path):
    path = tmp_path / "index.html"
    pages = ["A" * 2_000_000 + "\n", "B" * 3_000_000 + "\n"]
    write_atomic(path, pages[0])
    seen, stop = set(), threading.Event()

    def read():
        while not stop.is_set():
            seen.add(path.read_text(encoding="utf-8") in pages)

    reader = threading.Thread(target=read)
    reader.start()
    for i in range(30):
        write_atomic(path, pages[i % 2])
    stop.set()
    reader.join()
    assert seen == {True}


def test_live_page_off_and_bad_interval(tmp_path):
    with live_page(False, tmp_path / "index.html", "x", ["a"]) as live:
        live.started("a")
        live.finished("a", {}, 1.0)
    assert not (tmp_path / "index.html").exists()
    with pytest.raises(ValueError, match="interval_s must be positive"):
        LivePage(tmp_path / "index.html", "x", [], interval_s=0)
