"""Jobs: an explicit list, and/or seeded Poisson arrivals drawn from a model-family mix."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from testbed.spec.topology import FloatPair, Strict

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
    family: str = Field(min_length=1)
    checkpoint_gb: float | Range = Field(description="Checkpoint size, GB (a number or [low, high]).")
    work_gpu_h: float | Range = Field(description="Work in reference-GPU hours (a number or [low, high]).")
    weight: float = Field(1.0, gt=0)

    @model_validator(mode="after")
    def _ranges(self) -> "FamilyMix":
        _check_range(self.checkpoint_gb, "checkpoint_gb")
        if max(self.checkpoint_gb if isinstance(self.checkpoint_gb, tuple) else (self.checkpoint_gb,)) > MAX_CHECKPOINT_GB:
            raise ValueError(f"checkpoint_gb must be <= {MAX_CHECKPOINT_GB:g}")
        _check_range(self.work_gpu_h, "work_gpu_h")
        return self


class PoissonArrivals(Strict):
    kind: Literal["poisson"] = "poisson"
    jobs_per_day: float = Field(gt=0, le=100000)
    seed: int | None = None
    until_h: float | None = Field(None, gt=0, description="No arrivals after this time (default: whole run).")


# One entry of ``workloads.jobs``: a job as written in the scenario (the run's jobs: testbed.workload).
class JobEntry(Strict):
    id: str | None = None
    family: str = "custom"
    checkpoint_gb: float = Field(gt=0, le=MAX_CHECKPOINT_GB)
    work_gpu_h: float = Field(gt=0)
    arrival_h: float = Field(0.0, ge=0)
    origin: str | None = Field(None, description="Submitting site (default: drawn from the seed).")


class Workloads(Strict):
    jobs: list[JobEntry] = Field(default_factory=list)
    arrivals: PoissonArrivals | None = None
    mix: list[FamilyMix] = Field(default_factory=list)

    @model_validator(mode="after")
    def _something_to_run(self) -> "Workloads":
        if self.arrivals is not None and not self.mix:
            raise ValueError("arrivals need a non-empty 'mix' of model families")
        if not self.jobs and self.arrivals is None:
            raise ValueError("give 'jobs', or 'arrivals' with a 'mix'")
        return self
