"""The migration study: every migration policy drives the one controller over the scenario's jobs
on one substrate (sim, netns, mininet), with the power backend capping the jobs' GPUs.

Per policy ``<label>/``: the run log's tables (``*.parquet``), ``summary.json``,
``energy_by_site.csv`` and the figures ``energy_mix.png``, ``power_caps.png``; the comparison:
``comparison.json`` / ``comparison.md``, ``jct_cdf.png``, ``energy_by_policy.png``.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import pandas as pd

from testbed.analysis.compare import compare, comparison_markdown
from testbed.analysis.paper_setup import paper_setup
from testbed.analysis.plots import energy_by_policy, energy_mix, jct_cdf, power_caps
from testbed.analysis.summary import SUMMARY_METRICS, energy_by_site, summarize
from testbed.analysis.titles import words
from testbed.controller.controller import Controller
from testbed.inputs import Inputs, require_jobs
from testbed.policies import make_policy
from testbed.power.caps import CapEnforcer
from testbed.power.factory import backend_for, make_enforcer
from testbed.progress import progress_bar
from testbed.recorder.tables import with_policy
from testbed.recorder.writer import write_json, write_table
from testbed.spec.plugins import shown_name
from testbed.spec.policies import policy_label
from testbed.studies.base import PolicyRun, Study
from testbed.substrate import SUBSTRATES, make_substrate
from testbed.substrate.registry import SubstrateUnavailable, substrate_unavailable
from testbed.traces.base import Trace

NOTES = [
    "grid kWh: energy drawn beyond the site's renewable power (and battery) in each step (compute, transfers at "
    "P_sys split between both ends, idle nodes).",
    "mean JCT (common jobs): over jobs that every policy completed; changes vs static use this column.",
    "overran budget: actual migration time >= alpha x the TRUE remaining window at the destination (Eq. 1 violated "
    "in reality); outside window: actual time > the true window itself. Both judge only the moves made for a "
    "renewable window.",
    "no window: moves made on a grid signal (carbon intensity, price) without a renewable window at the destination, "
    "so without a window budget: counted apart, never as overran or outside window (migrations.parquet: trigger).",
    "battery kWh: energy batteries delivered (renewable + battery + grid kWh = all energy drawn); curtailed kWh: "
    "renewable energy neither used nor stored.",
    "overhead frac: time jobs spent paused in migration / (running + migrating time).",
]


def power_backend(sc, sub) -> CapEnforcer:
    """The run's cap enforcer: ``power.backend`` and what the substrate offers (its cap target)
    choose it, through the registry of power backends (one module each, testbed/power/)."""
    return make_enforcer(sc, sub.cap_target())


class MigrationStudy(Study):
    name = "migration"

    @classmethod
    def applies(cls, scenario) -> bool:
        return scenario.federated is None

    @classmethod
    def summary_metrics(cls) -> tuple[str, ...]:
        return SUMMARY_METRICS

    def validate(self) -> None:
        """Refuse a power backend that cannot cap this run's nodes."""
        live = SUBSTRATES.get(self.substrate).live
        backend_for(self.sc, self.sc.emulation.nodes if live else "analytic")

    def check(self, inputs: Inputs) -> None:
        require_jobs(inputs)  # a Poisson draw with no job: nothing to compare
        why = substrate_unavailable(self.substrate, inputs.scenario)  # refused up front, never mid-run
        if why:
            raise SubstrateUnavailable(f"--substrate {self.substrate} cannot run {self.sc.name} here: {why}")

    def live(self, inputs: Inputs) -> bool:
        return SUBSTRATES.get(self.substrate).live

    def start(self, inputs: Inputs, run_id: str | None, stack: contextlib.ExitStack) -> list[PolicyRun]:
        self.inputs, self.run_id = inputs, run_id
        self._jobs: dict[str, pd.DataFrame] = {}
        self._desc: dict = {}
        self._parts: dict[str, dict] = {}  # policy label -> what its substrate adds to the run's totals
        n_steps = self._steps()
        # a bar on a terminal, a line every 30 s with an ETA elsewhere (a log, CI, a notebook)
        self._bar = progress_bar(n_steps * len(self.sc.policies), self.sc.name, enabled=self.progress)
        stack.callback(self._bar.close)
        return [PolicyRun(policy_label(spec), spec) for spec in self.sc.policies]

    def run(self, run: PolicyRun):
        """A fresh substrate and cap enforcer per policy, released before the next one starts."""
        self._bar.set_postfix_str(run.label)
        self._step_n = 0
        self._t_run = [time.perf_counter(), None, None, None]  # start, first step, last step, end
        with make_substrate(self.substrate, self.inputs, self.run_id) as sub, power_backend(self.sc, sub) as caps:
            ctl = Controller(self.inputs, make_policy(run.spec, self.inputs.scenario), sub,
                             on_step=lambda k, n: self._on_step(), caps=caps, policy_name=shown_name(run.spec.name))
            rec = ctl.run()
            self._desc = {**sub.describe(), "power_backend": caps.name}
        # a substrate per policy: the cross-traffic and probe counts are the run's over all of them
        # (``cross_traffic``, ``probes``) and each policy's (``by_policy.<label>``); the rest, the last's.
        # Taken once the substrate is closed: its cross-traffic generators' last counters
        if (part := getattr(sub, "policy_part", None)) is not None:
            self._parts[run.label] = part()
            self._desc.update(sub.over_policies(self._parts))
        self._t_run[3] = time.perf_counter()
        return rec

    def summarize(self, run: PolicyRun, record, wall_s: float, folder: Path) -> dict:
        t_results = time.perf_counter()
        tables = record.tables()
        for name, df in tables.items():
            write_table(folder / f"{name}.parquet", df)
        summary = summarize(tables, policy=shown_name(run.spec.name), label=run.label)
        write_json(folder / "summary.json", summary)
        self._jobs[run.label] = tables["jobs"]
        if self.plots:
            seed = self.inputs.seed
            energy_mix(tables["timeseries"], tables["migrations"], folder / "energy_mix.png",
                       f"Energy mix per site under {words(run.label)} (seed {seed})")
            power_caps(tables["timeseries"], tables["power"], folder / "power_caps.png",
                       f"GPU power caps from renewables + grid top-up under {words(run.label)} (seed {seed})")
        by_site = with_policy(energy_by_site(tables["timeseries"]), shown_name(run.spec.name), run.label)
        by_site.to_csv(folder / "energy_by_site.csv", index=False, float_format="%.6f")
        if self.live(self.inputs):  # the control loop's measured pace, for the next run's estimate
            self._record_pace(tables, wall_s, time.perf_counter() - t_results)
        return summary

    def progress_state(self) -> tuple[float, float] | None:
        """Control steps done of the current policy's run, and its steps (for the live page)."""
        return float(getattr(self, "_step_n", 0)), float(self._steps())

    def _on_step(self) -> None:
        now = time.perf_counter()
        if self._t_run[1] is None:
            self._t_run[1] = now
        self._t_run[2] = now
        self._step_n += 1
        self._bar.update(1)

    def _steps(self) -> int:
        """Control steps of one policy's run."""
        return int(-(-self.sc.duration_s // self.sc.step_s))

    def _record_pace(self, tables: dict, wall_s: float, results_s: float) -> None:
        """The policy run's pace: per step outside transfers, the fixed part outside the steps (from the
        run's start to its first step, and from its last step to the substrate's release), and the
        seconds its results took to write."""
        from testbed.studies import pace

        em = self.sc.emulation
        migrations = tables["migrations"]
        transfer_s = float(migrations["actual_transfer_s"].fillna(0.0).sum()) if "actual_transfer_s" in migrations else 0.0
        t0, first, last, end = self._t_run
        fixed_s = (first - t0) + (end - last) if None not in (first, last, end) else 0.0
        pace.record(self.substrate, em.nodes, steps=self._steps(), wall_s=wall_s,
                    transfer_wall_s=transfer_s / em.time_scale, fixed_wall_s=fixed_s, results_wall_s=results_s,
                    jobs_steps=pace.job_steps(tables["jobs"], self.sc.duration_s, self.sc.step_s))

    def compare(self, summaries: dict[str, dict], out: Path) -> tuple[dict, str]:
        self._bar.close()
        cmp = compare(summaries, self._jobs, paper=paper_setup(self.sc.model_dump(mode="json")))
        title = f"{self.sc.name} (seed {self.inputs.seed}, substrate {self.substrate})"
        if self.plots:
            jct_cdf(self._jobs, out / "jct_cdf.png", f"Job completion time per policy (seed {self.inputs.seed})")
            energy_by_policy(summaries, out / "energy_by_policy.png", f"Energy per policy (seed {self.inputs.seed})")
        return cmp, comparison_markdown(cmp, title=title, notes=NOTES)

    def traces(self) -> list[tuple[str, Trace]]:
        inp = self.inputs
        return ([(f"renewable_kw:{site}", tr) for site, tr in inp.renewable_kw.items()]
                + [(f"bandwidth_gbps:{a}->{b}", tr) for (a, b), tr in inp.bandwidth_gbps.items()]
                + [(f"carbon_g_per_kwh:{site}", tr) for site, tr in inp.grid.carbon_g_per_kwh.items()]
                + [(f"price_per_kwh:{site}", tr) for site, tr in inp.grid.price_per_kwh.items()])

    def describe(self) -> dict:
        return self._desc
