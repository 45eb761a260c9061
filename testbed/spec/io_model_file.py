"""``substrate.io_model: PATH``: the calibration file a scenario names for the sim's migration I/O
truth, found relative to the scenario file (like every other file it names) and read at load
time, so that ``testbed validate`` and ``testbed run`` refuse the same bad file with the same
line: the field, the file, why; never its content."""

from __future__ import annotations

from pathlib import Path

from testbed import io_model
from testbed.spec.files import input_file_problem, resolve_file

FIELD = "substrate.io_model"


def io_model_file(value: str, base_dir: Path, downtime_s: float) -> tuple[str | None, list[tuple[str, str]]]:
    """``(resolved absolute path, [])`` for a calibration file that serves as an I/O model,
    ``(None, [])`` for ``measured`` / ``constant`` (no file of the scenario's), else ``(None, problems)``."""
    if value in (io_model.MEASURED, io_model.CONSTANT):
        return None, []
    path = resolve_file(value, base_dir)
    if path is None:
        return None, [(FIELD, f"file not found: {value}")]
    why = input_file_problem(path, io_model.MAX_FILE_BYTES)
    if why is not None:
        return None, [(FIELD, f"{path}: {why}")]
    try:
        io_model.load_io_model(path, downtime_s=downtime_s)
    except io_model.IoModelError as e:
        return None, [(FIELD, f"{where}: {msg}") for where, msg in e.problems]
    return str(path), []
