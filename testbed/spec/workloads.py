"""Jobs: an explicit list, and/or seeded Poisson arrivals drawn from a model-family mix."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from testbed.spec.programs import Program
from testbed.spec.base import FloatPair, Strict

Range = FloatPair
MAX_CHECKPOINT_GB = 1e12
"""A zettabyte: larger sizes would overflow the byte and energy arithmetic (a 1e9 GB checkpoint is
valid: its migration simply never finishes within the run)."""


def _check_range(value: float | Range, name: str) -> None:
    if isinstance(value, tuple):
        lo, hi = value
        if not 0 < lo <= hi:
            raise ValueError(f"{name} range must satisfy 0 < low <= high (got [{lo}, {hi}])")
    elif value <= 0:
        raise ValueError(f"{name} must be > 0")


class FamilyMix(Strict):
    family: str = Field(min_length=1, description="Model family name (free text, recorded with each job).")
    checkpoint_gb: float | Range = Field(description="Checkpoint size, GB (a number or [low, high]).")
    work_gpu_h: float | Range = Field(description="Work in reference-GPU hours (a number or [low, high]).")
    weight: float = Field(1.0, gt=0, description="Relative weight of this family in the draw.")

    @model_validator(mode="after")
    def _ranges(self) -> "FamilyMix":
        _check_range(self.checkpoint_gb, "checkpoint_gb")
        if max(self.checkpoint_gb if isinstance(self.checkpoint_gb, tuple) else (self.checkpoint_gb,)) > MAX_CHECKPOINT_GB:
            raise ValueError(f"checkpoint_gb must be <= {MAX_CHECKPOINT_GB:g}")
        _check_range(self.work_gpu_h, "work_gpu_h")
        return self


class PoissonArrivals(Strict):
    kind: Literal["poisson"] = Field("poisson", description="Arrival process: poisson.")
    jobs_per_day: float = Field(gt=0, le=100000, description="Mean number of arriving jobs per day.")
    seed: int | None = Field(None, description="Fixed sub-seed of this random stream (default: derived from the scenario's seed, so that `--seed` moves it).")
    until_h: float | None = Field(None, gt=0, description="No arrivals after this time (default: whole run).")


# One entry of ``workloads.jobs``: a job as written in the scenario (the run's jobs: testbed.workload).
class JobEntry(Strict):
    id: str | None = Field(None, description="Job id in the results (default: job<NNN> by list position).")
    family: str = Field("custom", description="Model family, for the reports and load-time calibration (free text).")
    checkpoint_gb: float = Field(gt=0, le=MAX_CHECKPOINT_GB, description="Checkpoint size in GB (1e9 bytes) that a migration moves.")
    work_gpu_h: float = Field(gt=0, description="Work of the job in GPU hours at speed 1.0.")
    arrival_h: float = Field(0.0, ge=0, description="When the job arrives, in scenario hours.")
    origin: str | None = Field(None, description="Submitting site (default: drawn with the scenario's seed).")


class Workloads(Strict):
    jobs: list[JobEntry] = Field(default_factory=list, description="Jobs listed one by one (besides or instead of Poisson arrivals).")
    arrivals: PoissonArrivals | None = Field(None, description="Poisson arrivals of jobs drawn from mix (none if omitted).")
    mix: list[FamilyMix] = Field(default_factory=list, description="Model families Poisson arrivals draw from, by weight.")
    programs: dict[str, Program] = Field(default_factory=dict, description=(
        "Your own training program per job family (docs/workloads.md): every job of that family runs it on the "
        "node agents (emulation.nodes: agents) instead of the stand-in, and migrates with its own checkpoint."))

    @model_validator(mode="after")
    def _something_to_run(self) -> "Workloads":
        if self.arrivals is not None and not self.mix:
            raise ValueError("arrivals need a non-empty 'mix' of model families")
        if not self.jobs and self.arrivals is None:
            raise ValueError("give 'jobs', or 'arrivals' with a 'mix'")
        families = {j.family for j in self.jobs} | {m.family for m in self.mix}
        unused = sorted(set(self.programs) - families)
        if unused:
            raise ValueError(f"programs: no job or mix entry has family {unused[0]!r} (a program runs the jobs of its family)")
        return self
