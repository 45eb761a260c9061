"""One default results root for every command that is given no --out (testbed.recorder.out_dir)."""

from __future__ import annotations

from pathlib import Path

from testbed.recorder.out_dir import RESULTS_ROOT_ENV, default_out_dir, results_root


def test_results_go_under_one_root_that_an_environment_variable_moves(monkeypatch, tmp_path):
    monkeypatch.delenv(RESULTS_ROOT_ENV, raising=False)
    assert results_root() == Path("results") and default_out_dir("q", 3).parent == Path("results")
    monkeypatch.setenv(RESULTS_ROOT_ENV, str(tmp_path / "elsewhere"))
    assert results_root() == tmp_path / "elsewhere"
    assert default_out_dir("q", 3).parent == tmp_path / "elsewhere" and default_out_dir("q", 3).name.startswith("q-s3-")


def test_no_command_writes_its_own_results_path():
    import testbed

    root = Path(testbed.__file__).parent
    hard = [f"{p.relative_to(root)}" for p in root.rglob("*.py")
            if 'Path("results")' in p.read_text(encoding="utf-8") and p.name != "out_dir.py"]
    assert hard == [], hard
