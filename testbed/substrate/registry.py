"""The substrates ``testbed run --substrate`` can name: each subpackage registers itself.

    register_substrate(SubstrateKind("mine", "what it is", make=_make, live=True))   # in substrate/mine/__init__.py

``make(inputs, run_id)`` builds one substrate per policy run (and may import its heavy modules
when called, so listing the substrates stays cheap). The CLI's ``--substrate`` choices, the sweep
file's ``substrate:`` and the runner's dispatch all read this registry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from testbed.errors import TestbedError
from testbed.registry import Registry

AUTO = "auto"
"""Not a substrate: ``choose_substrate`` resolves it to one (netns where the machine allows, else sim)."""


class SubstrateUnavailable(TestbedError):
    """This machine cannot run the scenario on the substrate asked for (said before anything is built)."""


@dataclass(frozen=True)
class SubstrateKind:
    name: str
    help: str                            # one line for ``--help``
    make: Callable[[Any, str | None], Any]   # (inputs, run_id) -> Substrate (a context manager)
    live: bool = False                   # builds live resources (namespaces, processes): root, a run id listed
                                         # in the state file first, a CPU share per sweep trial
    unavailable: Callable[[Any], str | None] | None = None  # (scenario) -> why this machine cannot run it, or None
    side_by_side: bool = False           # live: its runs can share one machine (every live resource is named by the
                                         # run id or lies in the run's own network namespaces): a sweep may run
                                         # its trials in parallel
    one_at_a_time: str | None = None     # live and not side_by_side: why not (said when --parallel asks for more)

    def parallel_problem(self) -> str | None:
        """Why two trials on this substrate must not run at once on one machine; None when they may."""
        if not self.live or self.side_by_side:
            return None
        return self.one_at_a_time or "its runs are not known to keep apart on one machine"


SUBSTRATES: Registry[SubstrateKind] = Registry("substrate")


def register_substrate(kind: SubstrateKind) -> SubstrateKind:
    return SUBSTRATES.add(kind.name, kind)


def substrate_choices(auto: bool = True) -> tuple[str, ...]:
    """What ``--substrate`` accepts: ``auto`` first, then every registered substrate."""
    return ((AUTO,) if auto else ()) + SUBSTRATES.names()


def unknown_substrate(name: str) -> str | None:
    """None for a registered substrate or ``auto``; else the one-line message."""
    if name == AUTO or name in SUBSTRATES:
        return None
    return f"unknown substrate {name!r} (known: {', '.join(substrate_choices())})"


def substrate_unavailable(name: str, scenario: Any) -> str | None:
    """Why this machine cannot run ``scenario`` on substrate ``name`` (asked before anything is
    built), or None."""
    kind = SUBSTRATES.get(name)
    return kind.unavailable(scenario) if kind.unavailable is not None else None


def make_substrate(name: str, inputs: Any, run_id: str | None = None) -> Any:
    """One substrate instance per policy run: each gets fresh, isolated resources (named by ``run_id``)."""
    return SUBSTRATES.get(name).make(inputs, run_id)
