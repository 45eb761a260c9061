"""The contract every study (the migration study, the federated PowerTrip study) fulfils for the one
runner (:func:`testbed.runner.run_scenario`).

A study knows what its scenario asks (which substrates it runs on, which power backend), how to run
one policy on one substrate, how to summarize that run and how to compare the policies. The runner
owns everything else: the results directory (checked, written atomically, its partial directory
listed under the run id), the traces table, the scenario copy and the manifest.

One instance serves one ``testbed run`` on one substrate: :meth:`validate` (before anything is built), :meth:`check`
(the inputs), :meth:`start` (the shared state, e.g. a live exchange, entered on the runner's stack),
then per :class:`PolicyRun` :meth:`run` and :meth:`summarize`, then :meth:`compare`.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testbed.inputs import Inputs
from testbed.spec.load import LoadedScenario
from testbed.traces.base import Trace


@dataclass(frozen=True)
class PolicyRun:
    """One run of a study: the scenario's policy entry ``spec`` as run under ``label`` (the name of
    its results folder). A policy entry may expand into several runs (``static_k`` with a list of k)."""

    label: str
    spec: Any
    policy: Any = None  # the policy object, where the study builds it up front


class Study(ABC):
    """One study of a scenario; see the module docstring for the order of the calls."""

    name: str = "abstract"

    def __init__(self, loaded: LoadedScenario, *, substrate: str, progress: bool = False, plots: bool = True) -> None:
        self.loaded = loaded
        self.sc = loaded.scenario
        self.substrate = substrate
        self.progress = progress
        self.plots = plots

    @classmethod
    @abstractmethod
    def applies(cls, scenario) -> bool:
        """Whether this study runs ``scenario``."""

    @classmethod
    def summary_metrics(cls) -> tuple[str, ...] | None:
        """The numeric columns this study's ``<policy>/summary.json`` can hold (what a sweep's
        ``metrics:`` may name, checked before any trial runs); None: not declared, so a sweep checks
        its metric names only against the summaries of the trials that ran."""
        return None

    @abstractmethod
    def validate(self) -> None:
        """Up front, before anything is built: refuse (``SpecError``) a substrate or power backend
        this study cannot run on."""

    def check(self, inputs: Inputs) -> None:
        """The built inputs are runnable (``SpecError`` otherwise)."""

    @abstractmethod
    def live(self, inputs: Inputs) -> bool:
        """Whether this run makes live resources (then it gets a run id, and needs root)."""

    @abstractmethod
    def start(self, inputs: Inputs, run_id: str | None, stack: contextlib.ExitStack) -> list[PolicyRun]:
        """Build what every policy shares (entering live resources on ``stack``, which the runner
        closes on every exit path); return the runs, in order."""

    @abstractmethod
    def run(self, run: PolicyRun) -> Any:
        """Run one policy on this run's substrate; return its record."""

    @abstractmethod
    def summarize(self, run: PolicyRun, record: Any, wall_s: float, folder: Path) -> dict:
        """Write the run's tables, ``summary.json`` (and figures where ``plots``) into ``folder``;
        return its summary."""

    @abstractmethod
    def compare(self, summaries: dict[str, dict], out: Path) -> tuple[dict, str]:
        """The comparison of every run (``comparison.json``) and its markdown (``comparison.md``);
        writes the study's comparison figures into ``out`` where ``plots``."""

    @abstractmethod
    def traces(self) -> list[tuple[str, Trace]]:
        """(series name, trace) of every input trace the study used, for ``traces.parquet``."""

    def progress_state(self) -> tuple[float, float] | None:
        """(done, total) of the current policy's run, for the live page; None: not known."""
        return None

    @abstractmethod
    def describe(self) -> dict:
        """The manifest's ``substrate`` entry (after the runs)."""
