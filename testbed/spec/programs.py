"""How a scenario names a user's training program: ``workloads.programs``, by job family (testbed.userjob runs it).

    workloads:
      jobs: [{id: j1, family: my-resnet, checkpoint_gb: 24, work_gpu_h: 6, origin: a}]
      programs:
        my-resnet:
          command: ["{python}", "train.py"]        # run in the site's namespace; {python}: testbed's Python
        my-mlp:
          callable: "my_pkg.train:main"            # main(ctx: testbed.userjob.contract.JobContext)

Every job of that family runs the program instead of the testbed's stand-in training, on node
agents (``emulation.nodes: agents``); the sim substrate models the job as any other.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pydantic import Field, model_validator

from testbed.spec.base import Strict

PYTHON = "{python}"


class Program(Strict):
    command: list[str] | None = Field(None, min_length=1, max_length=256, description=(
        "The program and its arguments (no shell); '{python}' stands for the Python testbed runs with."))
    callable: str | None = Field(None, pattern=r"^[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_]*$", description=(
        "A Python callable 'module:function' called with a testbed.userjob.contract.JobContext."))
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment variables for the program.")
    cwd: str | None = Field(None, description="Working directory (default: the scenario's folder).")
    checkpoint_timeout_s: float = Field(60.0, gt=0, le=3600, description=(
        "Seconds the program may take from SIGTERM to exiting with its checkpoint written."))
    start_timeout_s: float = Field(120.0, gt=0, le=3600, description=(
        "Seconds the program may take from its start (or resume) to its first progress line."))

    @model_validator(mode="after")
    def _one_of(self) -> "Program":
        if (self.command is None) == (self.callable is None):
            raise ValueError("give 'command' or 'callable', one of them")
        if self.command is not None and any(not a for a in self.command):
            raise ValueError("command: arguments must be non-empty strings")
        bad = [k for k in self.env if k.startswith("TESTBED_")]
        if bad:
            raise ValueError(f"env: {bad[0]} is set by the agent (the contract's variables)")
        return self

    def argv(self) -> list[str]:
        if self.callable is not None:
            return [sys.executable, "-m", "testbed.userjob.call", self.callable]
        assert self.command is not None
        return [sys.executable if a == PYTHON else a for a in self.command]


def resolve_program_dirs(data: object, base_dir: Path) -> object:
    """Raw scenario data with each program's ``cwd`` made absolute (relative to, and by default,
    the scenario's folder), before validation."""
    wl = data.get("workloads") if isinstance(data, dict) else None
    progs = wl.get("programs") if isinstance(wl, dict) else None
    if not isinstance(progs, dict):
        return data
    out = {}
    for fam, p in progs.items():
        if isinstance(p, dict) and (p.get("cwd") is None or isinstance(p.get("cwd"), str)):
            cwd = p.get("cwd")
            p = {**p, "cwd": str(base_dir.resolve() if cwd is None else (base_dir / Path(cwd).expanduser()).resolve())}
        out[fam] = p
    return {**data, "workloads": {**wl, "programs": out}}


def program_problems(sc) -> list[tuple[str, str]]:
    """A scenario's programs need node agents to run (the sim models them); in the docker runtime they run
    in the site's container (its image's files and packages; a cwd on the host is mounted at the same path)."""
    wl = sc.workloads
    if wl is None or not wl.programs:
        return []
    em = sc.emulation
    if em.nodes != "agents":
        return [("workloads.programs", f"programs run on node agents: set emulation.nodes: agents (it is {em.nodes!r})")]
    return []
