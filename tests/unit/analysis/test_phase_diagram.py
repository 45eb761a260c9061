"""The feasibility phase diagram renders, accepts measured points, and leaks no pyplot state."""

from __future__ import annotations

import pandas as pd
import pytest
from matplotlib._pylab_helpers import Gcf

from testbed.analysis.phase_diagram import plot_phase_diagram
from testbed.feasibility import TCP_EFFICIENCY_MTU1500, Corrections, FeasibilityParams

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _check_png(path):
    assert path.exists()
    assert path.read_bytes()[:8] == PNG_MAGIC
    assert path.stat().st_size > 20_000  # a real figure, not an empty canvas


def test_writes_a_png(tmp_path):
    path = plot_phase_diagram(tmp_path / "phase.png", 2.5 * 3600, FeasibilityParams())
    assert path == tmp_path / "phase.png"
    _check_png(path)


def test_with_measured_points(tmp_path):
    points = pd.DataFrame(
        {"checkpoint_gb": [5.0, 50.0, 500.0], "bandwidth_gbps": [1.0, 3.0, 2.0], "completed_in_budget": [True, True, False]}
    )
    _check_png(plot_phase_diagram(tmp_path / "measured.png", 2.5 * 3600, points=points, title="measured"))


def test_with_points_without_outcome(tmp_path):
    points = pd.DataFrame({"checkpoint_gb": [5.0, 50.0], "bandwidth_gbps": [1.0, 3.0]})
    _check_png(plot_phase_diagram(tmp_path / "points.png", 3600, points=points))


def test_points_need_size_and_bandwidth(tmp_path):
    with pytest.raises(ValueError, match="bandwidth_gbps"):
        plot_phase_diagram(tmp_path / "bad.png", 3600, points=pd.DataFrame({"checkpoint_gb": [1.0]}))


def test_with_corrections_and_a_short_window(tmp_path):
    params = FeasibilityParams(alpha=0.05, corrections=Corrections(TCP_EFFICIENCY_MTU1500, rtt_ms=80))
    _check_png(plot_phase_diagram(tmp_path / "corrected.png", 1800, params))


def test_window_without_any_feasible_region(tmp_path):
    _check_png(plot_phase_diagram(tmp_path / "none.png", 60, FeasibilityParams()))  # budget 6 s < load


def test_rejects_non_positive_window(tmp_path):
    with pytest.raises(ValueError, match="window_s"):
        plot_phase_diagram(tmp_path / "x.png", 0)


def test_no_pyplot_figures_left_open(tmp_path):
    before = Gcf.get_num_fig_managers()
    plot_phase_diagram(tmp_path / "phase.png", 9000)
    assert Gcf.get_num_fig_managers() == before
