"""The live page of a run in progress: ``index.html`` in the partial results directory, rewritten every
``interval_s`` (atomically: a temporary file, then a rename) with the progress, the ETA and what has
happened so far; the browser reloads it (a meta refresh tag). When the run ends, the runner writes
the final page (no refresh) over it and renames the directory to the results directory.

:class:`LivePage` is fed by the runner (:meth:`started`, :meth:`finished`, :meth:`event`) and asks
``progress()`` (the study's control-step bar: done, total) for the fraction done within a policy's run.
"""

from __future__ import annotations

import contextlib
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterator

from testbed.html.document import esc, page, write_atomic
from testbed.progress import eta_s, fmt_duration

INTERVAL_S = 5.0
KEY_METRICS = ("grid_kwh", "renewable_kwh", "mean_jct_s", "jobs_completed", "migrations", "migrations_overran",
               "time_to_accuracy_s", "final_accuracy", "rounds")


class LivePage:
    def __init__(self, path: Path, title: str, runs: list[str], *, estimate_s: float | None = None,
                 progress: Callable[[], tuple[float, float] | None] | None = None, interval_s: float | None = None,
                 clock: Callable[[], float] = time.monotonic, final_path: Path | None = None):
        interval_s = INTERVAL_S if interval_s is None else interval_s
        if interval_s <= 0:
            raise ValueError(f"interval_s must be positive (got {interval_s})")
        self.path, self.title, self.runs = Path(path), title, list(runs)
        self.estimate_s, self.progress, self.interval_s, self.clock = estimate_s, progress, interval_s, clock
        self.final_path = final_path
        self.t0 = clock()
        self.current: str | None = None
        self.done: dict[str, dict] = {}
        self.events: list[tuple[float, str]] = []
        self.writes = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- what the runner says ------------------------------------------------------------------------
    def event(self, text: str) -> None:
        with self._lock:
            self.events.append((self.clock() - self.t0, text))

    def started(self, label: str) -> None:
        self.current = label
        self.event(f"{label}: started")

    def finished(self, label: str, summary: dict, wall_s: float) -> None:
        with self._lock:
            self.done[label] = {**{k: summary.get(k) for k in KEY_METRICS if summary.get(k) is not None},
                                "wall_s": wall_s}
        self.current = None
        self.event(f"{label}: finished in {fmt_duration(wall_s)}")

    # -- the page --------------------------------------------------------------------------------------
    def fraction(self) -> float:
        """Of the whole run: finished runs, plus the share of the current one its bar has done."""
        n = max(len(self.runs), 1)
        part = 0.0
        if self.current is not None and self.progress is not None:
            got = self.progress()
            if got and got[1]:
                part = min(max(got[0] / got[1], 0.0), 1.0)
        return min((len(self.done) + part) / n, 1.0)

    def eta(self, elapsed: float) -> tuple[float | None, str]:
        """Seconds left and how it was found: the pace so far and the estimate made before the start,
        weighted by the share done (control steps are not equally long: a policy that moves nothing
        runs through its steps in seconds, one that migrates waits for its transfers), else either."""
        frac = self.fraction()
        left = eta_s(frac, 1.0, elapsed)
        before = None if self.estimate_s is None else max(0.0, self.estimate_s - elapsed)
        if left is not None and before is not None:
            return frac * left + (1.0 - frac) * before, "the pace so far and the estimate before the start"
        if left is not None:
            return left, "at the pace so far"
        if before is not None:
            return before, "the estimate made before the start"
        return None, ""

    def render(self) -> str:
        with self._lock:
            events, done = list(self.events), dict(self.done)
        elapsed = self.clock() - self.t0
        frac = self.fraction()
        left, how = self.eta(elapsed)
        eta = f"ETA {fmt_duration(left)} ({how})" if left is not None else "ETA: not known yet"
        now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        current = f"running: <strong>{esc(self.current)}</strong>" if self.current else "between runs"
        final = (f"<p>When the run ends this page is replaced by the results' page, "
                 f"<code>{esc(self.final_path)}</code>.</p>" if self.final_path else "")
        body = [f"<h1>{esc(self.title)} (in progress)</h1>",
                f'<div class="live"><p><progress max="1" value="{frac:.4f}"></progress> '
                f"<strong>{100 * frac:.0f} %</strong> · {len(done)}/{len(self.runs)} runs done · {current}</p>"
                f"<p>{esc(fmt_duration(elapsed))} elapsed · {esc(eta)}"
                + (f" · estimated before the start: {esc(fmt_duration(self.estimate_s))}"
                   if self.estimate_s is not None else "")
                + f"</p><p class=\"meta\">updated {esc(now)}, every {self.interval_s:g} s</p></div>", final]
        if done:
            cols = sorted({k for d in done.values() for k in d if k != "wall_s"}, key=KEY_METRICS.index) + ["wall_s"]
            head = "".join(f"<th>{esc(c)}</th>" for c in ["policy", *cols])
            rows = "".join("<tr><td>" + esc(lb) + "</td>" + "".join(
                f"<td>{_fmt(d.get(c))}</td>" for c in cols) + "</tr>" for lb, d in done.items())
            body.append(f"<h2>Finished runs</h2><table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
        waiting = [lb for lb in self.runs if lb not in done and lb != self.current]
        if waiting:
            body.append(f"<p>still to run: {esc(', '.join(waiting))}</p>")
        if events:
            body.append("<h2>What has happened</h2><table><thead><tr><th>after</th><th>event</th></tr></thead><tbody>"
                        + "".join(f"<tr><td>{esc(fmt_duration(t))}</td><td>{esc(e)}</td></tr>"
                                  for t, e in reversed(events)) + "</tbody></table>")
        return page(f"{self.title} (in progress)", "\n".join(body), refresh_s=self.interval_s)

    def write(self) -> Path:
        path = write_atomic(self.path, self.render())
        self.writes += 1
        return path

    # -- the rewriting thread -------------------------------------------------------------------------
    def start(self) -> "LivePage":
        self.write()
        self._thread = threading.Thread(target=self._loop, name="testbed-live-page", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.write()
            except OSError:  # the partial directory went away (the run is ending): stop quietly
                return

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return esc(v) if v is not None else ""


class _Off:
    """What the runner talks to when there is no live page (a sim run)."""

    def event(self, text: str) -> None: ...
    def started(self, label: str) -> None: ...
    def finished(self, label: str, summary: dict, wall_s: float) -> None: ...


@contextlib.contextmanager
def live_page(enabled: bool, path: Path, title: str, runs: list[str], **kw) -> Iterator["LivePage | _Off"]:
    """A :class:`LivePage` rewriting ``path`` while the block runs (stopped on every exit), or a no-op."""
    if not enabled:
        yield _Off()
        return
    live = LivePage(path, title, runs, **kw).start()
    try:
        yield live
    finally:
        live.stop()
