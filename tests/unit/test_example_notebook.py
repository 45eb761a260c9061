"""``examples/notebook.ipynb`` (issue #30) runs from top to bottom in a fresh kernel (nbclient, the
dev extra) without an error, and draws its figures: a scenario built as a dict, a 2 alphas x 10
seeds sweep from Python, one policy's time series, a metric by alpha, predicted vs realised times,
and a comparison of the two cells paired by seed."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = REPO / "examples" / "notebook.ipynb"


def test_the_notebook_is_kept_without_outputs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(not c.outputs and c.execution_count is None for c in code)  # small, and no stale figures
    assert "testbed.sweep(" in "".join(c.source for c in code) and "seeds=range(10)" in "".join(c.source for c in code)


@pytest.mark.slow  # a kernel and a 20-trial sweep: about a minute on 2 busy cores
def test_the_notebook_runs_and_draws_its_figures(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the sweep's temporary directory: this test's own
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    figures = [c for c in nb.cells if c.cell_type == "code"
               and any("image/png" in o.get("data", {}) for o in c.outputs)]
    assert len(figures) == 3, [c.source for c in figures]  # time series, metric by alpha, predicted vs realised
    text = "".join(o.get("text", "") + str(o.get("data", {}).get("text/plain", "")) for o in outputs)
    assert "policies[feasibility_aware].alpha" in text  # the two cells' one scenario difference
    assert "paired" in text and "no CI" in text  # the cells pair by seed; two single runs of other seeds do not
    assert not list(REPO.glob("examples/*.png"))  # nothing written beside the notebook
