"""``testbed run``: one scenario, every policy on identical inputs, one results directory."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pandas as pd
from tqdm import tqdm

from testbed.analysis.compare import compare, comparison_markdown
from testbed.analysis.plots import energy_by_policy, energy_mix, jct_cdf, power_caps
from testbed.analysis.summary import energy_by_site, summarize
from testbed.controller.controller import Controller
from testbed.errors import SpecError
from testbed.inputs import Inputs, build_inputs, require_jobs
from testbed.policies import make_policy
from testbed.recorder.manifest import build_manifest
from testbed.recorder.out_dir import default_out_dir
from testbed.netem import state
from testbed.netem.naming import new_run_id
from testbed.power.caps import CapEnforcer
from testbed.power.factory import backend_for, make_enforcer
from testbed.recorder.writer import atomic_dir, check_out_dir, partial_dir, write_json, write_table
from testbed.spec.load import LoadedScenario
from testbed.spec.policies import policy_label
from testbed.substrate import AUTO, SUBSTRATES, make_substrate, unknown_substrate


def choose_substrate(requested: str, sc) -> tuple[str, str]:
    """``auto``: netns where the machine allows (root, namespaces, and torch if the scenario wants
    real agents), else sim. Returns (substrate, why)."""
    if requested != AUTO:
        return requested, "as requested"
    import importlib.util
    import os

    if os.geteuid() != 0:
        return "sim", "not root: network namespaces need root, so the analytic substrate ran"
    from testbed.doctor import probe

    if not probe("netns").available:
        return "sim", "network namespaces are not available here (see `testbed doctor`)"
    if sc.emulation.nodes == "agents" and importlib.util.find_spec("torch") is None:
        return "sim", "the scenario asks for real training agents but torch is not installed"
    return "netns", "root and network namespaces available: sites are namespaces, links are shaped, bytes are real"


NOTES = [
    "non-renewable kWh: energy drawn beyond the site's renewable power in each step (compute, transfers at "
    "P_sys split between both ends, idle nodes).",
    "mean JCT (common jobs): over jobs that every policy completed; changes vs static use this column.",
    "overran budget: actual migration time >= alpha x the TRUE remaining window at the destination (Eq. 1 violated "
    "in reality); outside window: actual time > the true window itself.",
    "overhead frac: time jobs spent paused in migration / (running + migrating time).",
]


def _traces_table(inp: Inputs) -> pd.DataFrame:
    frames = []
    for site, tr in inp.renewable_kw.items():
        df = tr.to_frame()
        frames.append(df.assign(series=f"renewable_kw:{site}"))
    for (a, b), tr in inp.bandwidth_gbps.items():
        frames.append(tr.to_frame().assign(series=f"bandwidth_gbps:{a}->{b}"))
    return pd.concat(frames, ignore_index=True)


def power_backend(sc, sub) -> CapEnforcer:
    """The run's cap enforcer: ``power.backend`` and what the substrate offers (its cap target)
    choose it, through the registry of power backends (one module each, testbed/power/)."""
    return make_enforcer(sc, sub.cap_target())


def _check_power_backend(sc, substrate: str) -> None:
    """Up front, before anything is built: refuse a backend that cannot cap this run's nodes."""
    backend_for(sc, sc.emulation.nodes if SUBSTRATES.get(substrate).live else "analytic")


def run_scenario(loaded: LoadedScenario, *, out_dir: Path | None = None, substrate: str = "sim",
                 seed: int | None = None, progress: bool = True, force: bool = False,
                 argv: list[str] | None = None, plots: bool = True) -> Path:
    """``plots=False`` skips the figures (sweeps: most of a short trial's time is matplotlib)."""
    sc = loaded.scenario
    substrate, why = choose_substrate(substrate, sc)
    problem = unknown_substrate(substrate)
    if problem is not None:
        raise SpecError([("--substrate", problem)])
    print(f"substrate: {substrate} ({why})", file=sys.stderr)
    if sc.federated is not None:  # the PowerTrip study: site selection for FedAvg (testbed/federated/)
        from testbed.federated.run import run_federated

        return run_federated(loaded, out_dir=out_dir, substrate=substrate, seed=seed, progress=progress,
                             force=force, argv=argv, plots=plots)
    _check_power_backend(sc, substrate)
    inputs = build_inputs(sc, seed)
    require_jobs(inputs)  # a Poisson draw with no job: nothing to compare
    out_dir = out_dir or default_out_dir(sc.name, inputs.seed)
    checked = check_out_dir(out_dir, force, protect=(loaded.path,))
    n_steps = int(-(-sc.duration_s // sc.step_s))
    bar = tqdm(total=n_steps * len(sc.policies), desc=sc.name, unit="step", disable=not progress or not sys.stderr.isatty(),
               delay=2.0, file=sys.stderr, leave=False)
    summaries: dict[str, dict] = {}
    jobs: dict[str, pd.DataFrame] = {}
    wall: dict[str, float] = {}
    sub_desc: dict = {}
    # emulation: one run id names every live resource, listed in its state file before it exists
    # (the partial results directory included) so that `testbed clean` finds them after a crash
    run_id = new_run_id() if SUBSTRATES.get(substrate).live else None
    if run_id:
        from testbed.netem.fabric import require_root

        require_root(f"--substrate {substrate}")  # before the state file (root's /run/testbed) is written
    with state.listed(run_id, partial_dirs=[str(partial_dir(checked.path))]), \
            atomic_dir(out_dir, force, protect=(loaded.path,)) as tmp:
        for spec in sc.policies:
            label = policy_label(spec)
            bar.set_postfix_str(label)
            t_start = time.perf_counter()
            with make_substrate(substrate, inputs, run_id) as sub, power_backend(sc, sub) as caps:
                ctl = Controller(inputs, make_policy(spec, inputs.scenario), sub, on_step=lambda k, n: bar.update(1),
                                 caps=caps)
                rec = ctl.run()
                sub_desc = {**sub.describe(), "power_backend": caps.name}
            wall[label] = time.perf_counter() - t_start
            tables = rec.tables()
            pdir = tmp / label
            pdir.mkdir()
            for name, df in tables.items():
                write_table(pdir / f"{name}.parquet", df)
            summaries[label] = summarize(tables, policy=spec.name, label=label)
            write_json(pdir / "summary.json", summaries[label])
            jobs[label] = tables["jobs"]
            if plots:
                energy_mix(tables["timeseries"], tables["migrations"], pdir / "energy_mix.png",
                           f"{sc.name} - {label}: energy mix per site (seed {inputs.seed})")
                power_caps(tables["timeseries"], tables["power"], pdir / "power_caps.png",
                           f"{sc.name} - {label}: GPU caps from renewables + grid top-up (seed {inputs.seed})")
            energy_by_site(tables["timeseries"]).to_csv(pdir / "energy_by_site.csv", index=False, float_format="%.6f")
        bar.close()
        cmp = compare(summaries, jobs)
        write_json(tmp / "comparison.json", cmp)
        title = f"{sc.name} (seed {inputs.seed}, substrate {substrate})"
        (tmp / "comparison.md").write_text(comparison_markdown(cmp, title=title, notes=NOTES), encoding="utf-8")
        if plots:
            jct_cdf(jobs, tmp / "jct_cdf.png", f"JCT CDF - {sc.name}")
            energy_by_policy(summaries, tmp / "energy_by_policy.png", f"Energy by policy - {sc.name}")
        write_table(tmp / "traces.parquet", _traces_table(inputs))
        (tmp / "scenario.yaml").write_text(loaded.text, encoding="utf-8")
        manifest = build_manifest(
            scenario_sha256=loaded.sha256, scenario_path=str(loaded.path),
            scenario_resolved=inputs.scenario.model_dump(mode="json"), seed=inputs.seed, substrate=sub_desc,
            policies=[p.model_dump(mode="json") for p in sc.policies], wall_s=wall, argv=argv or [],
        )
        write_json(tmp / "manifest.json", manifest)
    return out_dir
