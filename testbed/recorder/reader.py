"""The one reader of what testbed writes: which file marks a run, a sweep or a report directory, in
which format, and how each is read back.

Every results directory carries a JSON marker whose ``format`` names what it is:

=========  ================  =====================
kind       file              format
=========  ================  =====================
run        ``manifest.json`` ``testbed-results/1``
sweep      ``sweep.json``    ``testbed-sweep/1``
report     ``report.json``   ``testbed-report/1``
=========  ================  =====================

The writers (recorder/manifest.py, sweep/runner.py, analysis/report.py) put these formats in; the
readers (the Python API's ``Results`` and ``SweepResults``, ``testbed report`` and its check, the HTML
pages) read through :func:`marker` and :func:`trial_record`. Errors name the file, never its contents.
"""

from __future__ import annotations

import json
from pathlib import Path

from testbed.errors import SpecError

RUN_MANIFEST, SWEEP_MANIFEST, REPORT_MANIFEST = "manifest.json", "sweep.json", "report.json"
RESULTS_FORMAT, SWEEP_FORMAT, REPORT_FORMAT = "testbed-results/1", "testbed-sweep/1", "testbed-report/1"
TRIAL_RECORD = "trial.json"  # a sweep trial's status, parameters and overrides, beside its run
MARKERS: dict[str, tuple[str, str]] = {  # kind -> (file, format)
    "run": (RUN_MANIFEST, RESULTS_FORMAT),
    "sweep": (SWEEP_MANIFEST, SWEEP_FORMAT),
    "report": (REPORT_MANIFEST, REPORT_FORMAT),
}
_WHAT = {"run": "testbed results", "sweep": "testbed sweep", "report": "testbed report"}


def json_object(path: Path) -> dict:
    """The JSON object in ``path`` ({} when the file holds another JSON type). A file that is missing
    or not JSON is a :class:`~testbed.errors.SpecError` naming it (FileNotFoundError is kept apart
    for callers that say "not a ... directory")."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise
    except (OSError, ValueError, RecursionError) as e:
        raise SpecError([(str(path), f"cannot be read as JSON ({type(e).__name__})")]) from None
    return data if isinstance(data, dict) else {}


def marker(directory: Path, kind: str, *, check_format: bool = True) -> dict:
    """The marker of ``directory`` as a ``kind`` (run, sweep, report) directory: its manifest, checked
    to carry that kind's format (``check_format=False``: any content, for directories written before
    the format was recorded). A SpecError names the directory or the file otherwise."""
    name, fmt = MARKERS[kind]
    path = Path(directory) / name
    try:
        data = json_object(path)
    except FileNotFoundError:
        raise SpecError([(str(directory), f"not a {_WHAT[kind]} directory (no {name})")]) from None
    if check_format and data.get("format") != fmt:
        raise SpecError([(str(path), f"not a {_WHAT[kind]} manifest (format {fmt} expected)")])
    return data


def is_kind(directory: Path, kind: str) -> bool:
    """Whether ``directory`` holds the marker file of ``kind`` (not whether it reads)."""
    return (Path(directory) / MARKERS[kind][0]).is_file()


def trial_record(trial_dir: Path) -> dict:
    """A sweep trial's record (``trial.json``), or {} when it is missing or unreadable (a trial that
    has not run, or was cut short)."""
    try:
        return json_object(Path(trial_dir) / TRIAL_RECORD)
    except (FileNotFoundError, SpecError):
        return {}
