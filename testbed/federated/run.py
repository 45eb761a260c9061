"""``testbed run`` for a federated scenario: every selection policy on the same inputs (traces,
partition, initial model), one results directory.

Layout: ``manifest.json``, ``scenario.yaml``, ``comparison.md`` / ``comparison.json`` (time-to-accuracy
per policy and the claims table), ``accuracy_vs_time.png``, ``sites_selected.png``,
``straggler_vs_pooled.png``, ``traces.parquet``, and per policy ``<label>/rounds.parquet``,
``<label>/sites.parquet``, ``<label>/summary.json``.
"""

from __future__ import annotations

import contextlib
import math
import sys
import time
from pathlib import Path

import pandas as pd

from testbed.analysis.federated_summary import (
    claims, comparison_markdown, sensitivity_targets, summarize_rounds, tta_at,
)
from testbed.errors import SpecError
from testbed.federated.controller import FederatedController
from testbed.federated.data import load_dataset, partition
from testbed.federated.policies import make_selection_policies
from testbed.federated.policies.static_k import StaticKPolicy
from testbed.inputs import build_inputs
from testbed.recorder.manifest import build_manifest
from testbed.recorder.out_dir import default_out_dir
from testbed.netem import state
from testbed.netem.naming import new_run_id
from testbed.power.factory import backend_for
from testbed.power.model_caps import NAME as MODEL_BACKEND
from testbed.recorder.writer import atomic_dir, check_out_dir, partial_dir, write_json, write_table
from testbed.seeding import pick_seed
from testbed.spec.federated_checks import participants
from testbed.spec.load import LoadedScenario

NOTES = [
    "time-to-accuracy: scenario time at the end of the first round whose held-out test accuracy reaches the target.",
    "straggler: round = max over selected sites of (down + compute + up); pooled: the paper's Eq. 7, one pass over "
    "the whole training set / summed capacity + the slowest exchange. The accuracy per round is real FedAvg in both; "
    "only the clock differs. straggler_vs_pooled.png shows the same rounds under both clocks.",
    "static_k picks the top k by the same power-to-cost score as powertrip each round; the best k is chosen post hoc "
    "(after seeing every k's result), which no online policy can do.",
    "the paper's absolute hours (EMNIST, 100 sites on 40 GPUs) are not comparable with ours (digits, declared "
    "compute scale): compare the relative reductions.",
]


def _emulated(substrate: str, inputs) -> bool:
    return substrate != "sim" and inputs.scenario.federated.emulated_transfers


def _modelled_power(sc) -> bool:
    """The study models compute from the power profiles: its backend must be the model."""
    try:
        return backend_for(sc, "analytic").name == MODEL_BACKEND
    except SpecError:
        return False


def _exchange(substrate: str, inputs, stack: contextlib.ExitStack, run_id: str | None):
    if not _emulated(substrate, inputs):
        return None, {"substrate": "sim", "comm": "modelled: latency + update bytes / bandwidth at the round start"}
    from testbed.federated.emulated import NetnsExchange

    ex = stack.enter_context(NetnsExchange(inputs, run_id=run_id))
    return ex, ex.describe


def run_federated(loaded: LoadedScenario, *, out_dir: Path | None, substrate: str, seed: int | None,
                  progress: bool, force: bool, argv: list[str] | None, plots: bool = True) -> Path:
    sc = loaded.scenario
    fl = sc.federated
    if substrate not in ("sim", "netns"):
        raise SpecError([("--substrate", f"the federated study runs on sim or netns, not {substrate!r}")])
    if not _modelled_power(sc):
        raise SpecError([("power.backend", "the federated study models compute from the power profiles: use 'emulated'")])
    inputs = build_inputs(sc, seed)
    out_dir = out_dir or default_out_dir(sc.name, inputs.seed)
    checked = check_out_dir(out_dir, force, protect=(loaded.path,))
    # emulation: one run id names every live resource, the partial results directory included, all
    # listed in the run's state file before they exist (so `testbed clean` finds them after a crash)
    run_id = None
    if _emulated(substrate, inputs):
        from testbed.netem.fabric import require_root

        require_root(f"--substrate {substrate}")
        run_id = new_run_id()
    parts = participants(inputs.scenario)
    data = load_dataset(fl.data.dataset)
    shards = partition(data, parts, scheme=fl.data.partition, alpha=fl.data.dirichlet_alpha,
                       seed=pick_seed(fl.data.seed, inputs.seed, "fl-partition"))
    runs = [(spec, pol) for spec in sc.policies for pol in make_selection_policies(spec, fl.aggregator)]
    statics = [p.label for _, p in runs if isinstance(p, StaticKPolicy)]
    summaries, rounds, wall = {}, {}, {}
    from testbed.nodes.determinism import configure

    configure(1)
    with contextlib.ExitStack() as stack, state.listed(run_id, partial_dirs=[str(partial_dir(checked.path))]), \
            atomic_dir(out_dir, force, protect=(loaded.path,)) as tmp:
        exchange, sub_desc = _exchange(substrate, inputs, stack, run_id)
        for spec, pol in runs:
            model = spec.round_time or fl.round_time
            t0 = time.perf_counter()
            rec = FederatedController(inputs, shards, pol, round_time=model, exchange=exchange,
                                      participants=parts).run()
            wall[pol.label] = time.perf_counter() - t0
            rdf, sdf = pd.DataFrame(rec.rounds), pd.DataFrame(rec.sites)
            summary = summarize_rounds(rdf, label=pol.label, policy=spec.name, target=fl.target_accuracy,
                                       round_time=model)
            summary["wall_s"] = wall[pol.label]
            summary["tta_h_at"] = tta_at(rdf, sensitivity_targets(fl.target_accuracy))
            if isinstance(pol, StaticKPolicy):
                summary["k"] = pol.k
            if len(sdf) and sdf["comm_measured"].any():
                m = sdf[sdf["comm_measured"]]
                summary["comm_measured_over_modelled"] = float(
                    (m["down_s"] + m["up_s"]).sum() / (m["down_pred_s"] + m["up_pred_s"]).sum())
            pdir = tmp / pol.label
            pdir.mkdir()
            write_table(pdir / "rounds.parquet", rdf)
            write_table(pdir / "sites.parquet", sdf)
            write_json(pdir / "summary.json", _finite(summary))
            summaries[pol.label], rounds[pol.label] = summary, rdf
            if progress:
                print(f"  {pol.label}: {summary['rounds']} rounds, time-to-accuracy "
                      f"{summary['time_to_accuracy_h']:.3f} h, {wall[pol.label]:.1f} s wall", file=sys.stderr)
        _best_static_summaries(tmp, sc.policies, summaries)
        cl = claims(summaries, statics)
        write_json(tmp / "comparison.json", _finite({"policies": summaries, "claims": cl}))
        title = f"{sc.name} (seed {inputs.seed}, substrate {sub_desc['substrate']}, target {fl.target_accuracy:g})"
        (tmp / "comparison.md").write_text(comparison_markdown(summaries, cl, title=title, notes=NOTES),
                                           encoding="utf-8")
        if plots:
            _plots(tmp, rounds, summaries, cl, fl.target_accuracy, sc.name)
        write_table(tmp / "traces.parquet", _traces_table(inputs, parts + [fl.aggregator]))
        (tmp / "scenario.yaml").write_text(loaded.text, encoding="utf-8")
        write_json(tmp / "manifest.json", build_manifest(
            scenario_sha256=loaded.sha256, scenario_path=str(loaded.path),
            scenario_resolved=inputs.scenario.model_dump(mode="json"), seed=inputs.seed,
            substrate={**sub_desc, "study": "federated (PowerTrip)", "partition_sizes": {p: shards.n(p) for p in parts}},
            policies=[p.model_dump(mode="json") for p in sc.policies], wall_s=wall, argv=argv or []))
    return out_dir


def _plots(tmp: Path, rounds, summaries, cl, target: float, name: str) -> None:
    from testbed.analysis.federated_plots import accuracy_vs_time, sites_selected, straggler_vs_pooled

    accuracy_vs_time(rounds, target, tmp / "accuracy_vs_time.png", f"{name}: test accuracy vs scenario time")
    sites_selected(rounds, tmp / "sites_selected.png", f"{name}: sites selected per round")
    picks = [c[key] for c in cl["by_model"].values() for key in ("powertrip", "best_static") if c.get(key)]
    picks = list(dict.fromkeys(picks)) or list(rounds)[:2]
    straggler_vs_pooled(rounds, picks, target, tmp / "straggler_vs_pooled.png",
                        f"{name}: the same rounds under the straggler (solid) and pooled Eq. 7 (dashed) clocks")


def _best_static_summaries(tmp: Path, specs, summaries: dict[str, dict]) -> None:
    """A ``static_k`` entry with a list of k also gets ``<label>/summary.json``: the best k's summary
    (post hoc, by time-to-accuracy), so every policy entry of the scenario has one (sweeps read them)."""
    from testbed.spec.policies import policy_label

    for spec in specs:
        if spec.name != "static_k" or not isinstance(spec.k, list):
            continue
        label = policy_label(spec)
        runs = [summaries[f"{label}-k{k}"] for k in spec.k]
        best = min(runs, key=lambda r: (not math.isfinite(r["time_to_accuracy_s"]), r["time_to_accuracy_s"],
                                        -r["final_accuracy"]))
        (tmp / label).mkdir(exist_ok=True)
        write_json(tmp / label / "summary.json", _finite({**best, "label": label, "best_of": [r["label"] for r in runs]}))


def _finite(x):
    """JSON has no NaN/inf: a missed target is written as null."""
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def _traces_table(inputs, sites: list[str]) -> pd.DataFrame:
    frames = [inputs.renewable_kw[s].to_frame().assign(series=f"available_kw:{s}") for s in sites]
    agg = inputs.scenario.federated.aggregator
    for s in sites:
        if s != agg:
            frames.append(inputs.bandwidth_gbps[(s, agg)].to_frame().assign(series=f"bandwidth_gbps:{s}->{agg}"))
    return pd.concat(frames, ignore_index=True)
