"""A program's progress lines as the agent reads them: each read takes only what was appended since
the last one, and gives the newest step with the time it was read (what the quota controller of
:mod:`testbed.power.throttle.quota_control` measures a user program's rate from)."""

from __future__ import annotations

import json
from pathlib import Path

MAX_LINE_BYTES = 1 << 16  # a longer unterminated piece is dropped (not a progress line)


def parse_step(line: bytes) -> int | None:
    """The ``step`` of one progress line (None: not a JSON object with an integer step)."""
    try:
        rec = json.loads(line)
    except ValueError:
        return None
    if isinstance(rec, dict):
        step = rec.get("step")
        if isinstance(step, int) and not isinstance(step, bool):
            return step
    return None


class ProgressTail:
    """Follows ``path`` (which may not exist yet, and may be appended to by a restarted program)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._offset = 0
        self._partial = b""
        self.step: int | None = None  # the newest step read so far
        self.lines = 0

    def skip_to_end(self) -> None:
        """Forget what is there now (a restart: only what the new process appends counts)."""
        try:
            self._offset = self.path.stat().st_size
        except FileNotFoundError:
            self._offset = 0
        self._partial = b""

    def feed(self, data: bytes) -> list[int]:
        """The steps of the complete lines in ``data`` (appended bytes, in order)."""
        buf = self._partial + data
        *complete, self._partial = buf.split(b"\n")
        if len(self._partial) > MAX_LINE_BYTES:
            self._partial = b""
        steps = [s for s in (parse_step(line) for line in complete if line.strip()) if s is not None]
        self.lines += len(complete)
        if steps:
            self.step = steps[-1]
        return steps

    def poll(self) -> list[int]:
        """Read what was appended since the last call; the steps it holds."""
        try:
            with open(self.path, "rb") as f:
                size = f.seek(0, 2)
                if size < self._offset:  # truncated or replaced: start over
                    self._offset, self._partial = 0, b""
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return []
        self._offset += len(data)
        return self.feed(data)
