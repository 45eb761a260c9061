"""Platform-only dependencies are extras: without them the simulator runs, and what needs them says
which extra to install in one line (pyproject.toml: emulation = pyroute2, xlsx = openpyxl)."""

from __future__ import annotations

import importlib.util
import sys
import tomllib
from pathlib import Path

import pytest

from testbed.errors import TraceError

REPO = Path(__file__).resolve().parents[2]


def test_pyproject_keeps_platform_dependencies_in_extras():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    base = " ".join(project["dependencies"])
    assert "pyroute2" not in base and "openpyxl" not in base
    extras = project["optional-dependencies"]
    assert any(r.startswith("pyroute2") for r in extras["emulation"])
    assert any(r.startswith("openpyxl") for r in extras["xlsx"])
    assert "mininet" not in extras  # the distribution's package, linked by scripts/setup.sh
    torch = next(r for r in extras["train"] if r.startswith("torch"))
    assert "==" not in torch and ">=" in torch  # a range; setup.sh picks the CPU build
    setup = (REPO / "scripts" / "setup.sh").read_text()
    assert "emulation" in setup and "xlsx" in setup and "download.pytorch.org/whl/cpu" in setup


def test_an_xlsx_trace_without_openpyxl_names_the_extra(monkeypatch):
    from testbed.traces.caiso import read_caiso_table

    for name in ("openpyxl", "openpyxl.utils", "openpyxl.utils.exceptions"):
        monkeypatch.setitem(sys.modules, name, None)  # import raises ImportError
    with pytest.raises(TraceError, match=r"needs openpyxl: pip install -e '\.\[xlsx\]'"):
        read_caiso_table(REPO / "traces" / "samples" / "caiso-sample.xlsx", "Curtailments")
    table, _ = read_caiso_table(REPO / "traces" / "samples" / "caiso-curtailments-sample.csv", "Curtailments")
    assert len(table) > 0  # the CSV export needs nothing


def test_a_live_substrate_without_pyroute2_is_refused_in_one_line(monkeypatch):
    from testbed.api import load
    from testbed.substrate.emulated.preflight import live_unavailable

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pyroute2" else real(name, *a))
    why = live_unavailable(load(REPO / "scenarios" / "quickstart.yaml"))
    assert why is not None and "pyroute2 is not installed" in why and "[emulation]" in why
