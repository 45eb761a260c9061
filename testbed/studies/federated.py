"""The federated study (PowerTrip, arXiv 2507.17904): every selection policy runs synchronous FedAvg
on the same inputs (traces, partition, initial model); the round's exchange is modelled (sim) or
real transfers over shaped links (netns), through :mod:`testbed.federated.exchange`.

Per policy ``<label>/``: ``rounds.parquet``, ``sites.parquet``, ``summary.json``, on netns
``transfers.parquet`` (every real transfer: its parts and the shaped rate it met) (a ``static_k`` entry
with a list of k also gets ``static_k/summary.json``, its best k's); the comparison:
``comparison.md`` / ``comparison.json`` (time-to-accuracy per policy and the claims table),
``accuracy_vs_time.png``, ``sites_selected.png``, ``straggler_vs_pooled.png``, ``gain_projection.png``
(projected vs measured gain per round of the runs that project one).
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
from pathlib import Path

import pandas as pd

from testbed.analysis.federated_summary import (
    SUMMARY_METRICS, claims, comm_gap_summary, comparison_markdown, energy_summary, sensitivity_targets,
    summarize_rounds, transfer_summary, tta_at,
)
from testbed.errors import SpecError
from testbed.federated.controller import FederatedController, FlRecord
from testbed.federated.data import load_dataset, partition
from testbed.federated.exchange import Exchange, emulated, make_exchange, unsupported
from testbed.federated.policies import make_selection_policies
from testbed.federated.policies.static_k import StaticKPolicy
from testbed.inputs import Inputs
from testbed.power.factory import backend_for
from testbed.power.model_caps import NAME as MODEL_BACKEND
from testbed.recorder.tables import typed, with_policy, with_time
from testbed.recorder.writer import write_json, write_table
from testbed.seeding import pick_seed
from testbed.spec.federated_checks import participants, policy_entries
from testbed.spec.plugins import shown_name
from testbed.spec.policies import policy_label
from testbed.studies.base import PolicyRun, Study
from testbed.substrate.registry import SubstrateUnavailable, substrate_unavailable
from testbed.traces.base import Trace

NOTES = [
    "time-to-accuracy, the same for every policy: the end of the first evaluation whose held-out test accuracy "
    "reaches the target (federated.time_to_accuracy: interpolated places it inside that round instead); a run that "
    "stops without reaching it is censored at its end, never dropped (the report counts it). Evaluations: after every FedAvg round "
    "(a global model exists only after aggregation) and after every epoch of the centralized baseline (one "
    "epoch-equivalent of work each, charged one epoch of compute, never a whole multi-epoch round).",
    "straggler: round = max over selected sites of (down + compute + up); pooled: the paper's Eq. 7 on the same "
    "work, the samples the selected sites train / summed capacity + the slowest exchange (both clocks charge the "
    "same samples per round); pooled_eq7_as_written: Eq. 7 as the paper writes it, one pass over the whole training "
    "set per round whatever the selected sites hold. The accuracy per round is real FedAvg in all; only the clock "
    "differs. straggler_vs_pooled.png shows the same rounds under all three clocks.",
    "energy, per selected site and round: compute (its active nodes at their capped power for its compute time), "
    "communication (p_sys_kw / 2 at each end of every model exchange, the aggregator's end too) and idle (its active "
    "nodes at idle power while it waits for the round to end); renewable up to the site's available power at the "
    "round start, the rest grid. Energy-to-accuracy is taken like time-to-accuracy; accuracy per kWh = final "
    "accuracy / total energy.",
    "static_k picks the top k by the same power-to-cost score as powertrip each round; the best k of one run is "
    "chosen post hoc (after seeing every k's result), which no online policy can do: the report chooses it on other "
    "seeds than those it judges.",
    "the paper's absolute hours (EMNIST, 100 sites on 40 GPUs) are not comparable with ours (another data "
    "set, this machine's compute speed): compare the relative reductions.",
]

def _modelled_power(sc) -> bool:
    """The study models compute from the power profiles: its backend must be the model."""
    try:
        return backend_for(sc, "analytic").name == MODEL_BACKEND
    except SpecError:
        return False


class FederatedStudy(Study):
    name = "federated (PowerTrip)"

    @classmethod
    def applies(cls, scenario) -> bool:
        return scenario.federated is not None

    @classmethod
    def summary_metrics(cls) -> tuple[str, ...]:
        return SUMMARY_METRICS

    def validate(self) -> None:
        if (why := unsupported(self.substrate)) is not None:
            raise SpecError([("--substrate", why)])
        if not _modelled_power(self.sc):
            raise SpecError([("power.backend",
                              "the federated study models compute from the power profiles: use 'auto'")])

    def check(self, inputs: Inputs) -> None:
        """As the migration study: a live exchange this machine cannot run is refused up front, in one line."""
        if emulated(self.substrate, inputs):
            why = substrate_unavailable(self.substrate, inputs.scenario)
            if why:
                raise SubstrateUnavailable(f"--substrate {self.substrate} cannot run {self.sc.name} here: {why}")

    def live(self, inputs: Inputs) -> bool:
        return emulated(self.substrate, inputs)

    def start(self, inputs: Inputs, run_id: str | None, stack: contextlib.ExitStack) -> list[PolicyRun]:
        fl = self.sc.federated
        self.inputs = inputs
        self.parts = participants(inputs.scenario)
        data = load_dataset(fl.data.dataset)
        self.shards = partition(data, self.parts, scheme=fl.data.partition, alpha=fl.data.dirichlet_alpha,
                                seed=pick_seed(fl.data.seed, inputs.seed, "fl-partition"))
        self.entries = policy_entries(self.sc)  # each policy under each clock: every entry names its clock
        runs = [PolicyRun(pol.label, spec, pol) for spec in self.entries
                for pol in make_selection_policies(spec, fl.aggregator)]
        self._statics = [r.label for r in runs if isinstance(r.policy, StaticKPolicy)]
        self.site_rates, self.profile = self._profile_rates(self.sc)
        if self.site_rates is None:
            self.samples_per_s, self.samples_per_s_source = self._compute_rate(fl, data, inputs.seed)
        else:
            from testbed.spec.compute_profile import describe_sites, mean_rate

            self.samples_per_s = mean_rate({p: self.site_rates[p] for p in self.parts})
            self.samples_per_s_source = (f"compute profile {self.profile.source}: {describe_sites(self.site_rates)} "
                                         "(the mean node rate over the participants)")
        self._rounds: dict[str, pd.DataFrame] = {}
        from testbed.nodes.determinism import configure

        configure(1)
        self.exchange: Exchange = stack.enter_context(make_exchange(self.substrate, inputs, run_id))
        return runs

    @staticmethod
    def _profile_rates(sc):
        """Each training site's rate from the compute profile (``samples_per_s: profile``), else (None, None)."""
        if sc.federated.compute.samples_per_s != "profile":
            return None, None
        from testbed.spec.compute_profile import open_profile, resolve_sites, training_sites

        prof = open_profile(sc.federated.compute.profile)
        return resolve_sites(prof, sc, training_sites(sc)), prof

    @staticmethod
    def _compute_rate(fl, data, seed: int) -> tuple[float, str]:
        """The reference node's samples/s and where it comes from (declared, or measured here)."""
        declared = fl.compute.samples_per_s
        if declared != "measured":
            return float(declared), "declared"
        from testbed.federated import throughput

        if fl.compute.measured_model == "update_sized":
            rate = throughput.measure_update_sized_samples_per_s(fl.update_gb, data, fl.training, seed=seed)
            return rate.samples_per_s, rate.describe()
        return (throughput.measure_samples_per_s(data, fl.training, seed=seed),
                "measured on this machine (CPU time, one thread): the study's model")

    def run(self, run: PolicyRun) -> FlRecord:
        self.exchange.take_transfers()  # this run's transfers only (a failed run's are not carried over)
        return FederatedController(self.inputs, self.shards, run.policy, round_time=run.spec.round_time,
                                   exchange=self.exchange, participants=self.parts,
                                   samples_per_s=self.samples_per_s,
                                   site_rates=None if self.site_rates is None else
                                   {s: r.reference_samples_per_s for s, r in self.site_rates.items()}).run()

    def summarize(self, run: PolicyRun, record: FlRecord, wall_s: float, folder: Path) -> dict:
        fl, pol = self.sc.federated, run.policy
        rdf, sdf = pd.DataFrame(record.rounds), pd.DataFrame(record.sites)
        summary = summarize_rounds(rdf, label=pol.label, policy=shown_name(run.spec.name), target=fl.target_accuracy,
                                   round_time=run.spec.round_time, tta_mode=fl.time_to_accuracy)
        summary.update(energy_summary(sdf))
        summary["wall_s"] = wall_s
        summary["samples_per_s"] = self.samples_per_s
        if self.site_rates is not None:
            from testbed.spec.compute_profile import describe_sites

            summary["compute_profile"] = describe_sites(self.site_rates)
        summary["tta_h_at"] = tta_at(rdf, sensitivity_targets(fl.target_accuracy), fl.time_to_accuracy)
        if isinstance(pol, StaticKPolicy):
            summary["k"] = pol.k
        summary.update(comm_gap_summary(sdf))
        transfers = pd.DataFrame(self.exchange.take_transfers())
        summary.update(transfer_summary(transfers))
        start = self.sc.start
        written = with_time(with_time(rdf.drop(columns=["candidates"], errors="ignore"), start, "t_start_s", "time_start"),
                            start, "t_end_s", "time_end")
        name = shown_name(run.spec.name)
        write_table(folder / "rounds.parquet", with_policy(written, name, pol.label))
        write_table(folder / "sites.parquet", with_policy(sdf, name, pol.label))
        write_table(folder / "candidates.parquet", with_policy(candidates_table(rdf), name, pol.label))
        if len(transfers):  # the real transfers (netns): their parts and the shaped rate they met
            write_table(folder / "transfers.parquet", with_policy(transfers, name, pol.label))
        write_json(folder / "summary.json", _finite(summary))
        self._rounds[pol.label] = rdf
        if self.progress:
            print(f"  {pol.label}: {summary['rounds']} rounds, time-to-accuracy "
                  f"{summary['time_to_accuracy_s'] / 3600.0:.3f} h, {wall_s:.1f} s wall", file=sys.stderr)
        return summary

    def compare(self, summaries: dict[str, dict], out: Path) -> tuple[dict, str]:
        fl = self.sc.federated
        _best_static_summaries(out, self.entries, summaries)
        cl = claims(summaries, self._statics)
        title = (f"{self.sc.name} (seed {self.inputs.seed}, substrate {self.exchange.describe['substrate']}, "
                 f"target {fl.target_accuracy:g})")
        if self.plots:
            _plots(out, self._rounds, summaries, cl, fl.target_accuracy)
        return (_finite({"policies": summaries, "claims": cl}),
                comparison_markdown(summaries, cl, title=title, notes=NOTES))

    def traces(self) -> list[tuple[str, Trace]]:
        inp, agg = self.inputs, self.sc.federated.aggregator
        sites = self.parts + [agg]
        return ([(f"available_kw:{s}", inp.renewable_kw[s]) for s in sites]
                + [(f"bandwidth_gbps:{s}->{agg}", inp.bandwidth_gbps[(s, agg)]) for s in sites if s != agg])

    def describe(self) -> dict:
        return {**self.exchange.describe, "study": self.name,
                "partition_sizes": {p: self.shards.n(p) for p in self.parts},
                "compute_samples_per_s": {"value": self.samples_per_s, "source": self.samples_per_s_source},
                **({} if self.site_rates is None else {"compute_profile": self._profile_manifest()})}

    def _profile_manifest(self) -> dict:
        """Which profile entry, and on what basis, gave each training site's speed."""
        return {"file": self.profile.source, "sha256": self.profile.sha256,
                "model": self.sc.federated.compute.measured_model,
                "sites": {s: {"entry": r.entry, "basis": r.basis, "chosen_by": r.chosen_by,
                              "node_samples_per_s": r.node_samples_per_s,
                              "reference_samples_per_s": r.reference_samples_per_s, "provenance": r.provenance}
                          for s, r in self.site_rates.items()}}


def _plots(tmp: Path, rounds, summaries, cl, target: float) -> None:
    from testbed.analysis.federated_plots import accuracy_vs_time, gain_projection, sites_selected, straggler_vs_pooled

    accuracy_vs_time(rounds, summaries, target, tmp / "accuracy_vs_time.png",
                     "Test accuracy vs scenario time (one seed; the report has the seeds)")
    sites_selected(rounds, summaries, tmp / "sites_selected.png", "Sites selected per round")
    picks = [c[key] for c in cl["by_model"].values() for key in ("powertrip", "best_static") if c.get(key)]
    picks = (list(dict.fromkeys(picks)) or list(rounds))[:2]  # two runs x three clocks: six lines
    straggler_vs_pooled(rounds, picks, target, tmp / "straggler_vs_pooled.png",
                        "The same rounds under three clocks\nstraggler (solid), pooled on the same work "
                        "(dashed), Eq. 7 as written (dotted)")
    gain_projection(rounds, tmp / "gain_projection.png", "Projected vs measured accuracy gain per round")


def _best_static_summaries(tmp: Path, specs, summaries: dict[str, dict]) -> None:
    """A ``static_k`` entry with a list of k also gets ``<label>/summary.json``: the best k's summary
    (post hoc, by time-to-accuracy), so every policy entry of the scenario has one (sweeps read them)."""
    for spec in specs:
        if spec.name != "static_k" or not isinstance(spec.k, list):
            continue
        label = policy_label(spec)
        runs = [summaries[f"{label}-k{k}"] for k in spec.k]
        best = min(runs, key=lambda r: (not math.isfinite(r["time_to_accuracy_s"]), r["time_to_accuracy_s"],
                                        -r["final_accuracy"]))
        (tmp / label).mkdir(exist_ok=True)
        write_json(tmp / label / "summary.json", _finite({**best, "label": label, "best_of": [r["label"] for r in runs]}))


def candidates_table(rounds: pd.DataFrame) -> pd.DataFrame:
    """What the policy weighed each round (the rounds' ``candidates``, JSON lists of dicts), long: one row
    per round, candidate (``rank``, in the policy's order) and number (``name``, ``value``)."""
    rows = []
    for r, text in zip(rounds.get("round", []), rounds.get("candidates", [])):
        for rank, cand in enumerate(json.loads(text) if isinstance(text, str) and text else []):
            rows += [{"round": int(r), "rank": rank, "name": str(k), "value": float(v)} for k, v in cand.items()
                     if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return typed(pd.DataFrame(rows, columns=["round", "rank", "name", "value"]),
                 {"round": "int64", "rank": "int64", "name": "str", "value": "float64"})


def _finite(x):
    """JSON has no NaN/inf: a missed target is written as null."""
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x
