"""Up-front bounds on the work a scenario asks for, so that nothing runs out of memory or for hours.

A few lines of YAML can ask for 10,000 sites, one-second steps for a year or 100,000 jobs a
day. :func:`size_problems` estimates the work from the validated scenario alone (nothing is
built) and refuses what is over a limit, naming the limit and how to raise it: the scenario's
``limits:`` block (docs/reference/scenario-files.md, "Validation and limits"). The defaults keep a run within a few GB of memory and
well under an hour on the sim substrate; the shipped scenarios use a few percent of them.
"""

from __future__ import annotations

import math

from pydantic import Field

from testbed.spec.base import Strict

DATASET_SAMPLES = {"digits": 1797}
"""Samples of the bundled federated datasets (an upper bound on what one round trains on)."""

PAD_S = 86400.0
"""Generated traces run one day past the scenario (``testbed.inputs.PAD_S``)."""


class Limits(Strict):
    """Raise these for a scenario that is big on purpose (memory and time grow in proportion)."""

    max_sites: int = Field(1_000, ge=1, description="Sites (policies compare destinations pairwise).")
    max_site_steps: int = Field(
        2_000_000, ge=1,
        description="Sites x steps x policies the run simulates (about 0.3 ms each on the sim substrate).")
    max_trace_samples: int = Field(
        10_000_000, ge=1,
        description="Samples of all traces held in memory: (sites + 2 x links) x steps of the run plus a day "
        "(about 100 bytes each).")
    max_jobs: int = Field(50_000, ge=1, description="Jobs listed plus the expected number of Poisson arrivals.")
    max_trace_mb: float = Field(256.0, gt=0, description="Largest trace file (CSV or workbook) read, MB.")
    max_fl_sgd_steps: int = Field(
        5_000_000, ge=1,
        description="Federated study: minibatch steps of real training at most (rounds x local epochs x "
        "batches of the whole dataset x policies; a few minutes at the default).")

    @property
    def max_trace_bytes(self) -> int:
        return int(self.max_trace_mb * 1e6)


def _steps(duration_s: float, step_s: float) -> int:
    return max(1, math.ceil(duration_s / step_s - 1e-9))


def expected_jobs(sc) -> float:
    """Listed jobs plus the mean number of Poisson arrivals."""
    wl = sc.workloads
    if wl is None:
        return 0.0
    n = float(len(wl.jobs))
    if wl.arrivals is not None:
        hours = sc.duration_h if wl.arrivals.until_h is None else min(wl.arrivals.until_h, sc.duration_h)
        n += wl.arrivals.jobs_per_day * hours / 24.0
    return n


def _federated_problems(sc) -> list[tuple[str, str]]:
    fl, lim = sc.federated, sc.limits
    from testbed.spec.federated_checks import policy_run_count  # each policy under each clock

    n_pol = policy_run_count(sc)
    batches = math.ceil(DATASET_SAMPLES.get(fl.data.dataset, 1797) / fl.training.batch_size)
    steps = fl.max_rounds * fl.training.local_epochs * batches * n_pol
    if steps <= lim.max_fl_sgd_steps:
        return []
    return [("limits.max_fl_sgd_steps", (
        f"up to {fl.max_rounds:,} rounds x {fl.training.local_epochs} local epochs x {batches:,} batches of "
        f"{fl.training.batch_size} x {n_pol} policies = {steps:,} training steps, over the limit of "
        f"{lim.max_fl_sgd_steps:,}: lower federated.max_rounds or training.local_epochs, raise "
        "training.batch_size, or raise limits.max_fl_sgd_steps in the scenario"))]


def size_problems(sc) -> list[tuple[str, str]]:
    """``(limits.FIELD, message)`` for every limit the scenario's work exceeds."""
    lim: Limits = sc.limits
    problems: list[tuple[str, str]] = []
    steps = _steps(sc.duration_s, sc.step_s)
    n_sites, n_links, n_pol = len(sc.sites), len(sc.links), len(sc.policies)
    site_steps = n_sites * steps * n_pol
    if n_sites > lim.max_sites:
        problems.append(("limits.max_sites", (
            f"{n_sites:,} sites, over the limit of {lim.max_sites:,}: use fewer sites, or raise limits.max_sites "
            "in the scenario")))
    if site_steps > lim.max_site_steps:
        problems.append(("limits.max_site_steps", (
            f"{n_sites:,} sites x {steps:,} steps ({sc.duration_h:g} h at {sc.step_s:g} s) x {n_pol} policies = "
            f"{site_steps:,} site-steps, over the limit of {lim.max_site_steps:,}: use fewer sites or policies, a "
            f"longer step_s or a shorter duration_h, or raise limits.max_site_steps in the scenario")))
    samples = (n_sites + 2 * n_links) * _steps(sc.duration_s + PAD_S, sc.step_s)
    if samples > lim.max_trace_samples:
        problems.append(("limits.max_trace_samples", (
            f"the traces of {n_sites:,} sites and {n_links:,} links at {sc.step_s:g} s steps hold {samples:,} "
            f"samples (about {samples * 100 / 1e9:.1f} GB), over the limit of {lim.max_trace_samples:,}: use a "
            f"longer step_s, fewer sites or links, or raise limits.max_trace_samples in the scenario")))
    if sc.federated is not None:
        problems += _federated_problems(sc)
    jobs = expected_jobs(sc)
    if jobs > lim.max_jobs:
        problems.append(("limits.max_jobs", (
            f"about {jobs:,.0f} jobs (listed plus expected arrivals over {sc.duration_h:g} h), over the limit of "
            f"{lim.max_jobs:,}: lower workloads.arrivals.jobs_per_day, or raise limits.max_jobs in the scenario")))
    return problems
