"""How long an emulation will take on the wall clock, said before it starts.

On a live substrate the clock runs at ``emulation.time_scale`` scenario seconds per wall second
while a transfer is in flight and skips idle time (``skip_idle``), so the wall time is about the
scenario time spent on transfers divided by ``time_scale``, plus the control loop's own time:

- **migration study**: the analytic substrate runs the same inputs first (seconds) and predicts
  the migrations; the estimate is its wall time plus their transfer time / ``time_scale``, plus
  every policy's control steps, fabric set-up and results at the pace measured by earlier emulated
  runs on this machine, or before the first one the pace shipped with the code
  (:func:`testbed.studies.pace.expected`). When the
  analytic run cannot run, the bound is every policy's whole scenario at ``time_scale``.
- **federated (PowerTrip) study**: an upper bound, every round exchanging the update over the
  slowest participant's link (down and up), for at most ``max_rounds`` rounds and ``max_hours``;
  real FedAvg training comes on top.

Per-transfer set-up (connect, verify, checkpoint save and load) is not in the estimate.
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass

from testbed.errors import TestbedError
from testbed.inputs import Inputs
from testbed.progress import fmt_duration
from testbed.spec.load import LoadedScenario

WARN_WALL_S = 600.0
"""An emulation expected to take longer than this gets a warning naming ``emulation.time_scale``."""


@dataclass(frozen=True)
class WallEstimate:
    seconds: float
    transfers: int
    time_scale: float
    basis: str
    bound: bool = False  # an upper bound rather than an expectation

    def line(self) -> str:
        about = "at most" if self.bound else "about"
        return (f"estimated wall time: {about} {fmt_duration(self.seconds)} ({self.basis}; "
                f"emulation.time_scale {self.time_scale:g}, idle time skipped)")

    def warning(self) -> str | None:
        if self.seconds <= WARN_WALL_S:
            return None
        factor = math.ceil(self.seconds / (WARN_WALL_S / 2))  # a time_scale that aims at about 5 minutes
        return (f"warning: this emulation may take {fmt_duration(self.seconds)} of wall time; raise "
                f"emulation.time_scale (now {self.time_scale:g}; e.g. --set emulation.time_scale="
                f"{self.time_scale * factor:g}) to shorten it")


def estimate(loaded: LoadedScenario, inputs: Inputs, substrate: str = "netns") -> WallEstimate:
    sc = inputs.scenario
    if sc.federated is not None:
        return _federated(sc)
    return _migration(loaded, inputs, substrate)


def _upper_bound(sc) -> WallEstimate:
    n = len(sc.policies)
    t = sc.emulation.time_scale
    return WallEstimate(n * sc.duration_s / t, 0, t, f"{n} policies x {sc.duration_h:g} h, transfers always in flight",
                        bound=True)


def _migration(loaded: LoadedScenario, inputs: Inputs, substrate: str = "netns") -> WallEstimate:
    from testbed.studies.migration import MigrationStudy

    sc = inputs.scenario
    t = sc.emulation.time_scale
    study = MigrationStudy(loaded, substrate="sim", progress=False, plots=False)
    t0 = time.perf_counter()
    n, transfer_s, jobs_steps = 0, 0.0, 0
    from testbed.studies import pace

    try:
        study.validate()
        with contextlib.ExitStack() as stack:
            for run in study.start(inputs, None, stack):
                tables = study.run(run).tables()
                mig = tables["migrations"]
                jobs_steps += pace.job_steps(tables["jobs"], sc.duration_s, sc.step_s)
                n += len(mig)
                if len(mig) and "outcome_transfer_s" in mig:
                    transfer_s += float(mig["outcome_transfer_s"].fillna(0.0).sum())
    except TestbedError:
        return _upper_bound(sc)
    control_s = time.perf_counter() - t0

    n_runs = len(sc.policies)
    steps = n_runs * math.ceil(sc.duration_s / sc.step_s)
    expected = pace.expected(substrate, sc.emulation.nodes)
    if expected is None:
        pace_s, pace_txt = 0.0, (f"{steps} control steps not included: their pace on {substrate} with "
                                 f"{sc.emulation.nodes} nodes is measured by the first such run here")
    else:
        loop_s = expected.loop_s(steps, jobs_steps)
        pace_s = loop_s + n_runs * (expected.fixed_s + expected.results_s) + expected.finish_s
        per = f"{steps} control steps at {expected.step_s:.3g} s each" + (
            f" and {jobs_steps} job-steps at {expected.job_step_s:.3g} s" if expected.job_step_s else "")
        pace_txt = (f"{per}, {expected.fixed_s + expected.results_s:.3g} s "
                    f"per policy run to bring the fabric up and down and write its results and "
                    f"{expected.finish_s:.3g} s to compare them, {expected.source}")
    return WallEstimate(control_s + transfer_s / t + pace_s, n, t,
                        f"the sim substrate predicts {n} migration{'s' if n != 1 else ''} over {n_runs} policies, "
                        f"{fmt_duration(transfer_s)} of scenario time in transfers; {pace_txt}")


def _federated(sc) -> WallEstimate:
    from testbed.spec.federated_checks import participants, policy_run_count

    fl = sc.federated
    t = sc.emulation.time_scale
    parts = participants(sc)
    bw = {frozenset((link.a, link.b)): link.bandwidth_gbps for link in sc.links}
    slowest = min((bw.get(frozenset((p, fl.aggregator)), float("inf")) for p in parts), default=float("inf"))
    update_gb = fl.update_gb or 0.0
    round_s = 2 * update_gb * 8 / slowest if slowest not in (0, float("inf")) else 0.0
    runs = policy_run_count(sc)
    per_run_s = min(fl.max_rounds * round_s, fl.max_hours * 3600.0)
    transfers = runs * fl.max_rounds * 2 * len(parts)
    return WallEstimate(runs * per_run_s / t, transfers, t,
                        f"up to {fl.max_rounds} rounds x {runs} policy runs, each round's update "
                        f"({update_gb:g} GB down and up) over the slowest participant link; training on top",
                        bound=True)
