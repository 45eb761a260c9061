"""The jobs of a scenario: explicit ones plus seeded Poisson arrivals from a model-family mix."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from testbed.seeding import pick_seed, rng
from testbed.spec.scenario import Scenario


@dataclass(frozen=True)
class JobSubmission:
    """One job of the run as submitted to the cluster: an entry of ``workloads.jobs`` with its
    defaults resolved, or a drawn Poisson arrival. Fixed for the run; the controller's
    :class:`testbed.controller.cluster.ClusterJob` carries it with the job's changing state."""

    id: str
    family: str
    checkpoint_gb: float
    work_gpu_h: float
    arrival_s: float
    origin: str


def _draw(value: float | tuple[float, float], g: np.random.Generator) -> float:
    if isinstance(value, tuple):
        return float(g.uniform(value[0], value[1]))
    return float(value)


def generate_jobs(sc: Scenario) -> list[JobSubmission]:
    """All jobs, sorted by arrival then id. Same scenario and seed -> same jobs."""
    sites = [s.name for s in sc.sites]
    wl = sc.workloads
    origin_rng = rng(sc.seed, "workload", "origin")
    jobs: list[JobSubmission] = []
    for i, j in enumerate(wl.jobs):
        origin = j.origin if j.origin is not None else sites[int(origin_rng.integers(len(sites)))]
        jobs.append(JobSubmission(j.id or f"job{i:03d}", j.family, j.checkpoint_gb, j.work_gpu_h, j.arrival_h * 3600.0, origin))
    if wl.arrivals is not None:
        arr = wl.arrivals
        g = np.random.default_rng(pick_seed(arr.seed, sc.seed, "workload", "arrivals"))
        until_s = min(sc.duration_s, (arr.until_h or sc.duration_h) * 3600.0)
        rate_per_s = arr.jobs_per_day / 86400.0
        weights = np.array([m.weight for m in wl.mix], dtype=float)
        weights /= weights.sum()
        t, n = 0.0, 0
        while True:
            t += float(g.exponential(1.0 / rate_per_s))
            if t >= until_s:
                break
            mix = wl.mix[int(g.choice(len(wl.mix), p=weights))]
            origin = sites[int(g.integers(len(sites)))]
            jobs.append(
                JobSubmission(f"a{n:04d}", mix.family, _draw(mix.checkpoint_gb, g), _draw(mix.work_gpu_h, g), t, origin)
            )
            n += 1
    jobs.sort(key=lambda j: (j.arrival_s, j.id))
    return jobs
