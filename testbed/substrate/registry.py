"""The substrates ``testbed run --substrate`` can name: each subpackage registers itself.

    register_substrate(SubstrateKind("mine", "what it is", make=_make, live=True))   # in substrate/mine/__init__.py

``make(inputs, run_id)`` builds one substrate per policy run (and may import its heavy modules
when called, so listing the substrates stays cheap). The entry also says what every other part of
testbed asks of a substrate, so none of them keeps a list of substrates:

- ``testbed doctor``'s line (``doctor``: which capabilities it needs, :func:`doctor_checks`);
- whether the federated study runs on it, and with which exchange (``federated``);
- its place in ``--substrate auto``'s choice (``auto_rank``, ``auto_refusal``, ``auto_reason``:
  :func:`choose_substrate`);
- why this machine cannot run a scenario on it (``unavailable``), the node runtimes it can start
  (``runtimes``) and whether sweep trials on it may run side by side.

The CLI's ``--substrate`` choices, the sweep file's ``substrate:`` (:data:`SubstrateName`), the
runner's dispatch, the doctor's table and the federated study all read this registry. A hook may be
given as a ``"module:attr"`` string (imported when used, :func:`testbed.registry.resolve`): that is how
a substrate names code above it in the import order (the federated study's exchange) without
importing it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import AfterValidator, Field

from testbed.errors import TestbedError
from testbed.node_kinds import NODE_RUNTIMES
from testbed.registry import Registry, resolve

AUTO = "auto"
"""Not a substrate: ``choose_substrate`` resolves it to one (netns where the machine allows, else sim)."""


class SubstrateUnavailable(TestbedError):
    """This machine cannot run the scenario on the substrate asked for (said before anything is built)."""


Hook = str | Callable[..., Any]  # a callable, or the "module:attr" that names one


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
    runtimes: tuple[str, ...] | None = None  # live: the node runtimes (emulation.runtime) it starts agents with;
                                         # None: every registered one
    doctor: Hook | None = None           # (capabilities) -> (capabilities it needs, what it is when usable): its
                                         # line in `testbed doctor` (testbed.doctor.report); None: not listed
    federated: Hook | None = None        # (inputs, run_id=...) -> the federated study's exchange on it
                                         # (testbed.federated.exchange.Exchange); None: the study refuses it
    auto_rank: int | None = None         # --substrate auto may choose it: the highest rank not refused
    auto_refusal: Hook | None = None     # (scenario) -> why auto must not choose it here, or None
    auto_reason: str = ""                # said when auto chooses it

    def hook(self, field: str) -> Any:
        """The callable stored in ``field`` (imported now if it was given by name); None if unset."""
        ref = getattr(self, field)
        return None if ref is None else resolve(ref)

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
    """None for a registered substrate or ``auto``; else the one-line message (with a "did you mean")."""
    if name == AUTO or (isinstance(name, str) and name in SUBSTRATES):
        return None
    from testbed.suggest import did_you_mean

    known = substrate_choices()
    return f"unknown substrate {name!r}{did_you_mean(str(name), known)} (known: {', '.join(known)})"


def check_substrate_name(name: str) -> str:
    """The field check of :data:`SubstrateName` (pydantic validator)."""
    problem = unknown_substrate(name)
    if problem is not None:
        raise ValueError(problem)
    return name


def _substrate_schema(schema: dict) -> None:
    schema["enum"] = list(substrate_choices())


SubstrateName = Annotated[str, AfterValidator(check_substrate_name), Field(json_schema_extra=_substrate_schema)]
"""A field type: a registered substrate or ``auto``, checked when validated (with a "did you mean") and
listed in the JSON schema as the substrates registered when it is made."""


def substrate_unavailable(name: str, scenario: Any) -> str | None:
    """Why this machine cannot run ``scenario`` on substrate ``name`` (asked before anything is
    built), or None. A live substrate refuses a node runtime it does not start agents with."""
    kind = SUBSTRATES.get(name)
    runtime = scenario.emulation.runtime
    if kind.live and kind.runtimes is not None and runtime not in kind.runtimes:
        return (f"the {name} substrate starts node agents with runtime {' or '.join(kind.runtimes)} only "
                f"(emulation.runtime is {runtime!r})")
    return kind.unavailable(scenario) if kind.unavailable is not None else None


def choose_substrate(requested: str, scenario: Any) -> tuple[str, str]:
    """``auto``: the substrate of highest ``auto_rank`` whose ``auto_refusal`` says nothing against
    this machine and ``scenario`` (netns where root and namespaces allow, else sim). Returns (substrate,
    why): the reason of the first refusal, if any, else the chosen one's ``auto_reason``."""
    if requested != AUTO:
        return requested, "as requested"
    ranked = sorted((k for _, k in SUBSTRATES.items() if k.auto_rank is not None), key=lambda k: -k.auto_rank)
    refused: str | None = None
    for kind in ranked:
        check = kind.hook("auto_refusal")
        why_not = check(scenario) if check is not None else None
        if why_not is None:
            return kind.name, refused or kind.auto_reason
        refused = refused or why_not
    raise SubstrateUnavailable(f"--substrate auto: no substrate can run here ({refused or 'none may be chosen'})")


def federated_substrates() -> tuple[str, ...]:
    """The substrates the federated study runs on (their entry names its exchange)."""
    return tuple(name for name, kind in SUBSTRATES.items() if kind.federated is not None)


def doctor_checks() -> dict[str, Callable]:
    """``testbed doctor``'s lines: name -> check of each substrate, then each node runtime
    (:data:`testbed.node_kinds.NODE_RUNTIMES`), whose entry has a ``doctor`` hook, in registration
    order. A runtime named as a substrate is listed as ``runtime NAME``."""
    checks: dict[str, Callable] = {name: kind.hook("doctor") for name, kind in SUBSTRATES.items()
                                   if kind.doctor is not None}
    for name, runtime in NODE_RUNTIMES.items():
        if runtime.doctor is not None:
            checks[f"runtime {name}" if name in checks else name] = runtime.hook("doctor")
    return checks


def make_substrate(name: str, inputs: Any, run_id: str | None = None) -> Any:
    """One substrate instance per policy run: each gets fresh, isolated resources (named by ``run_id``)."""
    return SUBSTRATES.get(name).make(inputs, run_id)
