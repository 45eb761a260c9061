"""Renewable trace kinds: the context a builder gets, the plug-in decorator and the dispatch.

Every kind is one entry of :data:`testbed.spec.trace_sources.TRACE_KINDS`: its source model and its
builder. A built-in's model is declared in the spec and names its builder here by
``"testbed.traces.<file>:build"``; a plug-in is one file:

    @register_trace_kind(MySource)          # MySource: a Strict model with kind: Literal["mine"]
    def build(src: MySource, ctx: TraceContext) -> Trace: ...

``build_renewable`` is the dispatch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from testbed.seeding import derive_seed
from testbed.spec.trace_sources import TRACE_KINDS
from testbed.traces.base import Trace

TraceBuilder = Callable[[Any, "TraceContext"], Trace]


def sub_seed(explicit: int | None, base: int, *keys: object) -> int:
    """A stream's seed: derived from the source's explicit seed if it has one, else from the scenario's."""
    return derive_seed(explicit, *keys) if explicit is not None else derive_seed(base, *keys)


@dataclass(frozen=True)
class TraceContext:
    """What a builder knows besides its own source entry: the validated scenario, the site it builds
    for, the run's seed, the span to cover (generators run ``horizon_s``, past the scenario end) and
    the trace's name."""

    scenario: Any       # testbed.spec.scenario.Scenario
    site_name: str
    seed: int
    horizon_s: float
    step_s: float
    name: str

    @property
    def site(self) -> Any:
        return self.scenario.site(self.site_name)

    def sub_seed(self, explicit: int | None, *keys: object) -> int:
        return sub_seed(explicit, self.seed, *keys)


def register_trace_kind(model: type) -> Callable[[TraceBuilder], TraceBuilder]:
    """Function decorator: the decorated ``build(src, ctx) -> Trace`` makes the traces of ``model``'s
    kind; both join :data:`TRACE_KINDS` as one entry (the model the scenario's ``traces.renewable`` union)."""
    return TRACE_KINDS.implements(model)


def build_renewable(src: Any, ctx: TraceContext) -> Trace:
    """The trace of one site's renewable source."""
    return TRACE_KINDS.builder(src.kind)(src, ctx)
