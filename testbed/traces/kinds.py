"""Renewable trace kinds: each registers its builder in its own file.

    @register_trace_kind(MySource)          # MySource: a Strict model with kind: Literal["mine"]
    def _build(src: MySource, ctx: TraceContext) -> Trace: ...

``register_trace_kind`` also adds the model to the scenario's ``traces.renewable`` union (if its
file did not already), so a plug-in trace kind is one file. ``build_renewable`` is the dispatch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from testbed.registry import Registry
from testbed.seeding import derive_seed
from testbed.spec.trace_sources import renewable_source
from testbed.spec.union import check_member
from testbed.traces.base import Trace

TraceBuilder = Callable[[Any, "TraceContext"], Trace]
TRACE_KINDS: Registry[TraceBuilder] = Registry("trace kind")


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
    """Function decorator: the decorated ``build(src, ctx) -> Trace`` makes the traces of ``model``'s kind."""
    renewable_source(model)  # a no-op when the spec module registered it already
    kind = check_member(model, "kind")

    def deco(build: TraceBuilder) -> TraceBuilder:
        return TRACE_KINDS.add(kind, build)

    return deco


def build_renewable(src: Any, ctx: TraceContext) -> Trace:
    """The trace of one site's renewable source (``UnknownNameError`` if its kind has no builder)."""
    return TRACE_KINDS.get(src.kind)(src, ctx)
