"""testbed/recorder/reader.py: the one reader of run, sweep and report markers and trial records."""

from __future__ import annotations

import json

import pytest

from testbed.errors import SpecError
from testbed.recorder import reader
from testbed.recorder.out_dir import MARKERS


def test_every_kind_has_one_file_and_format_and_the_out_dir_guard_uses_them():
    assert set(reader.MARKERS) == {"run", "sweep", "report"}
    for kind, (name, fmt) in reader.MARKERS.items():
        assert MARKERS[kind] == (name, fmt.split("/")[0] + "/")


def test_a_marker_is_read_checked_and_named_in_every_error(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    with pytest.raises(SpecError, match="not a testbed results directory \\(no manifest.json\\)"):
        reader.marker(run, "run")
    (run / "manifest.json").write_text("{secret: not json")
    with pytest.raises(SpecError) as e:
        reader.marker(run, "run")
    assert "manifest.json" in str(e.value) and "cannot be read as JSON" in str(e.value) and "secret" not in str(e.value)
    (run / "manifest.json").write_text(json.dumps({"format": "testbed-sweep/1"}))
    with pytest.raises(SpecError, match="format testbed-results/1 expected"):
        reader.marker(run, "run")
    assert reader.marker(run, "run", check_format=False) == {"format": "testbed-sweep/1"}
    (run / "manifest.json").write_text(json.dumps({"format": reader.RESULTS_FORMAT, "seed": 3}))
    assert reader.marker(run, "run")["seed"] == 3 and reader.is_kind(run, "run") and not reader.is_kind(run, "sweep")


def test_a_trial_record_that_is_missing_or_broken_is_empty(tmp_path):
    assert reader.trial_record(tmp_path) == {}
    (tmp_path / "trial.json").write_text("[1, 2")
    assert reader.trial_record(tmp_path) == {}
    (tmp_path / "trial.json").write_text(json.dumps({"status": "completed"}))
    assert reader.trial_record(tmp_path) == {"status": "completed"}
