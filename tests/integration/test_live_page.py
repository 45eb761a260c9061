"""The live page through the runner, cheaply: a live substrate that is the analytic one under
another name (so the runner takes its emulation path: root, a run id in the state file, the wall-time
estimate, the partial directory) rewrites index.html in the partial directory while the policies run,
and the final page replaces it without the reload. A real netns run does the same, in minutes."""

from __future__ import annotations

import pytest

import testbed
from testbed.html import live
from testbed.studies import pace
from testbed.substrate import SUBSTRATES, SubstrateKind
from testbed.substrate.sim.substrate import SimSubstrate
from tests.conftest import small_scenario_dict

pytestmark = pytest.mark.root


def test_live_page_during_an_emulation_path_run(tmp_path, monkeypatch):
    monkeypatch.setitem(SUBSTRATES._entries, "sim_live", SubstrateKind(
        "sim_live", "the analytic substrate, taken as live (a test plug-in)", make=lambda inputs, run_id: SimSubstrate(inputs),
        live=True))
    monkeypatch.setattr(pace, "record", lambda *a, **k: None)  # not a real emulation's pace
    monkeypatch.setattr(live, "INTERVAL_S", 0.02)
    pages: list[tuple[str, str]] = []
    write = live.LivePage.write

    def spy(self):
        path = write(self)
        pages.append((path.parent.name, path.read_text(encoding="utf-8")))
        return path

    monkeypatch.setattr(live.LivePage, "write", spy)
    out = testbed.run(small_scenario_dict(), substrate="sim_live", out=tmp_path / "run", progress=False).path
    assert len(pages) >= 2
    assert all(folder.startswith(".run.partial-") for folder, _ in pages)  # never the results directory itself
    assert all("(in progress)" in text and 'http-equiv="refresh"' in text for _, text in pages)
    assert any("finished in" in text and "ETA" in text for _, text in pages)  # what has happened so far
    final = (out / "index.html").read_text(encoding="utf-8")
    assert "(in progress)" not in final and 'http-equiv="refresh"' not in final and "<img " in final
