"""Where a control step's wall time goes (``testbed bench emulation``): exclusive timers per part.

The controller, the cap enforcer, the substrate and the agent client mark their parts with
:func:`part`; nothing is measured unless a :class:`StepProfile` is active (:func:`profiling`), and
then only on the thread that activated it (the controller's: a migration's own thread and a pool's
workers are not the step's critical path; a concurrent batch is timed by the caller that waits for
it). Parts nest and their time is exclusive (an RPC inside ``caps`` counts as ``rpc``, not twice),
so the parts add up to the time spent inside any of them; the rest of a step's wall time is
``other``. Only steps are timed (between :meth:`StepProfile.step_start` and ``step_done``: bringing a
substrate up and down is not a step's); each controller run (one policy on one substrate) is a
:class:`RunProfile` of its own.

The parts:

- ``rpc``: command round trips to node agents (the controller waits for their answers);
- ``clock``: the emulation's clock running in real time while transfers are in flight (the step's
  scenario time really passing: what the emulation must spend);
- ``caps``: computing and handing over the step's caps (outside their round trips);
- ``settle``: reading back what the caps came to (outside round trips and sleeps);
- ``sleep``: fixed waits (polling for a measurement);
- ``policy``: placement, migration decisions, jobs started and finished (outside round trips);
- ``plan``: the step's power plan from the traces;
- ``account``: progress and energy within the step;
- ``record``: the run log's rows and the progress callback.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field

PARTS = ("rpc", "clock", "caps", "settle", "sleep", "policy", "plan", "account", "record")
"""The parts a step is split into (see the module's docstring); ``other`` is the rest."""

WORK_PARTS = tuple(p for p in PARTS if p != "sleep")
"""What a step must spend: every part but fixed sleeps."""

_active: "StepProfile | None" = None


@dataclass
class RunProfile:
    """One controller run: exclusive seconds per part, commands sent and round trips waited for,
    each step's wall time and commands."""

    substrate: str
    label: str
    seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    rpcs: int = 0
    round_trips: int = 0  # a concurrent batch is one
    step_walls: list[float] = field(default_factory=list)
    step_rpcs: list[int] = field(default_factory=list)
    commands: dict[str, list] = field(default_factory=dict)  # command -> [count, seconds] (controller thread)

    def summary(self) -> dict:
        return summarize([self])


class StepProfile:
    def __init__(self) -> None:
        self.thread = threading.get_ident()
        self.runs: list[RunProfile] = []
        self._stack: list[list] = []  # [name, start, child seconds]
        self._t_step: float | None = None
        self._rpcs_at_step = 0

    def _mine(self) -> bool:
        """On the controller's thread, inside a step (set-up and tear-down are not a step's)."""
        return threading.get_ident() == self.thread and self._t_step is not None

    def _run(self) -> RunProfile:
        if not self.runs:
            self.runs.append(RunProfile("?", "?"))
        return self.runs[-1]

    def begin_run(self, substrate: str, label: str) -> None:
        if threading.get_ident() == self.thread:
            self.runs.append(RunProfile(substrate, label))

    @contextlib.contextmanager
    def part(self, name: str) -> Iterator[None]:
        if not self._mine():
            yield
            return
        frame = [name, time.perf_counter(), 0.0]
        self._stack.append(frame)
        try:
            yield
        finally:
            self._stack.pop()
            total = time.perf_counter() - frame[1]
            self._run().seconds[name] += total - frame[2]
            if self._stack:
                self._stack[-1][2] += total

    @contextlib.contextmanager
    def command(self, cmd: str) -> Iterator[None]:
        """One command sent to an agent and its answer awaited: a round trip, timed as ``rpc`` and per command."""
        if not self._mine():
            yield
            return
        self.count_rpc()
        t0 = time.perf_counter()
        try:
            with self.part("rpc"):
                yield
        finally:
            c = self._run().commands.setdefault(cmd, [0, 0.0])
            c[0] += 1
            c[1] += time.perf_counter() - t0

    def count_rpc(self, n: int = 1) -> None:
        """``n`` commands sent, waited for as one round trip."""
        if self._mine():
            run = self._run()
            run.rpcs += n
            run.round_trips += 1

    def step_start(self) -> None:
        self._t_step = time.perf_counter()
        self._rpcs_at_step = self._run().rpcs

    def step_done(self) -> None:
        if self._t_step is not None:
            run = self._run()
            run.step_walls.append(time.perf_counter() - self._t_step)
            run.step_rpcs.append(run.rpcs - self._rpcs_at_step)
            self._t_step = None


def summarize(runs: list[RunProfile]) -> dict:
    """Totals over the runs' steps: wall, each part, other, commands and round trips, and the ratios
    ``parts_over_wall`` (how much of the wall the parts explain) and ``wall_over_work`` (the wall
    over what the step must spend: every part but sleeps)."""
    walls = [w for r in runs for w in r.step_walls]
    wall = sum(walls)
    parts = {p: float(sum(r.seconds.get(p, 0.0) for r in runs)) for p in PARTS}
    measured = sum(parts.values())
    work = sum(parts[p] for p in WORK_PARTS)
    steps = len(walls)
    rpcs = sum(r.rpcs for r in runs)
    commands: dict[str, dict] = {}
    for r in runs:
        for cmd, (n, sec) in r.commands.items():
            c = commands.setdefault(cmd, {"n": 0, "seconds": 0.0})
            c["n"] += n
            c["seconds"] += sec
    trips = sum(r.round_trips for r in runs)
    return {
        "steps": steps, "wall_s": wall, "parts_s": parts, "other_s": max(0.0, wall - measured),
        "per_step_ms": {**{p: 1000 * s / steps for p, s in parts.items()},
                        "other": 1000 * max(0.0, wall - measured) / steps} if steps else {},
        "wall_per_step_ms": 1000 * wall / steps if steps else None,
        "commands": rpcs, "round_trips": trips, "by_command": commands,
        "round_trips_per_step": trips / steps if steps else None,
        "steps_without_round_trip": sum(1 for r in runs for n in r.step_rpcs if n == 0),
        "parts_over_wall": measured / wall if wall > 0 else None,
        "wall_over_work": wall / work if work > 0 else None,
    }


@contextlib.contextmanager
def profiling() -> Iterator[StepProfile]:
    """Profile every control run on this thread until the block ends."""
    global _active
    prev, _active = _active, StepProfile()
    try:
        yield _active
    finally:
        _active = prev


def active() -> StepProfile | None:
    return _active


@contextlib.contextmanager
def _nothing() -> Iterator[None]:
    yield


def part(name: str):
    """A context manager timing ``name`` on the active profile (nothing when none is active)."""
    prof = _active
    return prof.part(name) if prof is not None else _nothing()


def command(cmd: str):
    """A context manager timing one agent command's round trip (nothing when no profile is active)."""
    prof = _active
    return prof.command(cmd) if prof is not None else _nothing()


def count_rpc(n: int = 1) -> None:
    """``n`` commands sent and waited for as one round trip (on the active profile, if any)."""
    prof = _active
    if prof is not None:
        prof.count_rpc(n)
