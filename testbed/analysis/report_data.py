"""What a report is derived from, kept beside it (``REPORT/data/``) so that anyone can re-derive and
re-check every table and verdict of a committed report without the run directories.

``collect`` reads the runs once (summaries, per-migration and per-job tables, manifests' provenance)
into a :class:`ReportData`; the report is rendered from that object only, never from the run folders,
so ``testbed report --check`` renders the same report from the stored data and compares.

Stored (all with today's names, :mod:`testbed.analysis.names`):

- ``runs.json.gz``: one entry per run (its directory as given, substrate, seed, scenario name, sweep
  cell and parameters, overrides, the hash of its resolved scenario, the input directory it came
  from, the commit and dirty state of the tree that ran it) — resolved scenarios once per hash in
  ``scenarios.json.gz``;
- ``summaries.json.gz``: every run x policy ``summary.json`` exactly as read;
- ``migrations.parquet`` and ``jobs.parquet``: every run x policy's raw tables with the run's index;
- ``comparisons.json.gz``: the federated study's per-run comparisons (its raw output; the migration
  study's comparisons are re-derived from summaries and jobs).
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from testbed.analysis.names import current, current_columns, param_column, typed_as_today
from testbed.analysis.scenario_id import experiment
from testbed.analysis.validation import Run
from testbed.recorder.reader import marker

DATA_DIR = "data"
DATA_FORMAT = "testbed-report-data/1"


@dataclass
class ReportData:
    """Everything a report is rendered from (see the module docstring)."""

    runs: list[Run]
    sources: list[str]                        # per run: the input directory (a sweep or a run) it came from
    git: list[dict]                           # per run: {"commit", "dirty"} of the tree that ran it
    summaries: list[dict]                     # {"run", "label", "summary"} (today's names)
    migrations: pd.DataFrame                  # raw migrations, today's names, column "run" and "label"
    jobs: pd.DataFrame                        # raw jobs, today's names, column "run" and "label"
    fed_comparisons: dict[int, dict] = field(default_factory=dict)  # run index -> its comparison.json

    def run_meta(self, i: int) -> dict:
        """The columns every row of run ``i`` carries in the report's tables."""
        run = self.runs[i]
        return {"run": i, "run_dir": str(run.path), "substrate": run.substrate, "seed": run.seed, "cell": run.cell,
                **{param_column(k): (json.dumps(v, sort_keys=True) if isinstance(v, (list, dict)) else v)
                   for k, v in run.params.items()}}

    def summaries_frame(self) -> pd.DataFrame:
        """One row per run x policy: the run's columns, then its summary's keys in sorted order (the same
        columns in the same order whichever testbed wrote the summaries and whatever was renamed since)."""
        return pd.DataFrame([{**self.run_meta(s["run"]), **dict(sorted(s["summary"].items())), "label": s["label"]}
                             for s in self.summaries])

    # --- stored form ---------------------------------------------------------------------------

    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        scenarios: dict[str, dict] = {}
        runs = []
        for i, run in enumerate(self.runs):
            h = run.scenario_hash
            scenarios.setdefault(h, experiment(run.resolved))
            runs.append({"path": str(run.path), "substrate": run.substrate, "seed": run.seed, "scenario": run.scenario,
                         "cell": run.cell, "params": run.params, "overrides": run.overrides, "scenario_hash": h,
                         "source": self.sources[i], "git": self.git[i]})
        _dump(folder / "runs.json.gz", {"format": DATA_FORMAT, "runs": runs})
        _dump(folder / "scenarios.json.gz", scenarios)
        _dump(folder / "summaries.json.gz", self.summaries)
        _dump(folder / "comparisons.json.gz", {str(k): v for k, v in sorted(self.fed_comparisons.items())})
        for name, df in (("migrations", self.migrations), ("jobs", self.jobs)):
            df.drop(columns=["candidates"], errors="ignore").to_parquet(folder / f"{name}.parquet", index=False,
                                                                        compression="zstd")

    @classmethod
    def load(cls, folder: Path) -> "ReportData":
        from testbed.analysis.validation import ReportError

        try:
            head = _read(folder / "runs.json.gz")
            if not isinstance(head, dict) or head.get("format") != DATA_FORMAT:
                raise ReportError(f"{folder / 'runs.json.gz'}: not a {DATA_FORMAT} file")
            scenarios = _read(folder / "scenarios.json.gz")
            runs, sources, git = [], [], []
            for r in head["runs"]:
                resolved = dict(scenarios[r["scenario_hash"]])
                resolved["seed"] = r["seed"]
                runs.append(Run(Path(r["path"]), r["substrate"], int(r["seed"]), r["scenario"], r["cell"],
                                dict(r["params"]), resolved, dict(r["overrides"]), r["scenario_hash"]))
                sources.append(r["source"])
                git.append(dict(r["git"]))
            fed = {int(k): current_comparison(v) for k, v in _read(folder / "comparisons.json.gz").items()}
            summaries = [{**s, "summary": current(s["summary"])} for s in _read(folder / "summaries.json.gz")]
            migrations = current_columns("migrations", pd.read_parquet(folder / "migrations.parquet"))
            jobs = current_columns("jobs", pd.read_parquet(folder / "jobs.parquet"))
            return cls(runs, sources, git, summaries, migrations, jobs, fed)
        except ReportError:
            raise
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            raise ReportError(f"{folder}: the report's stored data is missing or unreadable ({type(e).__name__}); "
                              "rebuild the report from its runs") from None


def _dump(path: Path, obj) -> None:
    """Gzipped JSON with no timestamp in the gzip header, so the same data gives the same bytes."""
    raw = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=_plain).encode()
    with open(path, "wb") as f, gzip.GzipFile(fileobj=f, mode="wb", mtime=0, compresslevel=9) as z:
        z.write(raw)


def _plain(x):
    try:
        return x.item()  # a numpy scalar
    except AttributeError:
        return str(x)


def _read(path: Path):
    with gzip.open(path, "rb") as z:
        return json.loads(z.read())


def _source_names(dirs: list[Path], per_dir: list[int]) -> list[str]:
    names = []
    for d, n in zip(dirs, per_dir):
        names += [Path(d).resolve().name] * n
    return names


def _git_of(run: Run) -> dict:
    man = marker(run.path, "run", check_format=False)
    g = man.get("git") if isinstance(man.get("git"), dict) else {}
    return {"commit": g.get("commit"), "dirty": g.get("dirty")}


def collect(dirs: list[Path], runs_per_dir: list[list[Run]]) -> ReportData:
    """Read every run of every input directory once (``runs_per_dir``: validation.find_runs of each)."""
    from testbed.analysis.federated_claims import is_federated

    runs = [r for rs in runs_per_dir for r in rs]
    sources = _source_names(dirs, [len(rs) for rs in runs_per_dir])
    summaries, migs, jobs, fed = [], [], [], {}
    for i, run in enumerate(runs):
        if is_federated(run):
            f = run.path / "comparison.json"
            if f.is_file():
                fed[i] = current_comparison(json.loads(f.read_text()))
            continue
        for label in sorted(p.name for p in run.path.iterdir() if (p / "summary.json").is_file()):
            folder = run.path / label
            summaries.append({"run": i, "label": label,
                              "summary": current(json.loads((folder / "summary.json").read_text()))})
            m = typed_as_today("migrations", current_columns("migrations", pd.read_parquet(folder / "migrations.parquet")))
            if len(m):
                migs.append(m.assign(run=i, label=label))
            if (folder / "jobs.parquet").is_file():
                j = current_columns("jobs", pd.read_parquet(folder / "jobs.parquet"))
                jobs.append(j.assign(run=i, label=label))
    return ReportData(runs, sources, [_git_of(r) for r in runs], summaries,
                      pd.concat(migs, ignore_index=True) if migs else pd.DataFrame(),
                      pd.concat(jobs, ignore_index=True) if jobs else pd.DataFrame(), fed)


def comparisons(data: ReportData) -> list[dict | None]:
    """Per run, its comparison of policies: the migration study's re-derived from its summaries and
    jobs (testbed.analysis.compare, today's names), the federated study's as it stored it."""
    from testbed.analysis.compare import compare
    from testbed.analysis.paper_setup import paper_setup

    by_run: dict[int, dict[str, dict]] = {}
    for s in data.summaries:
        by_run.setdefault(s["run"], {})[s["label"]] = s["summary"]
    jobs = {k: g for k, g in data.jobs.groupby(["run", "label"])} if len(data.jobs) else {}
    out: list[dict | None] = []
    for i, run in enumerate(data.runs):
        if i in data.fed_comparisons:
            out.append(data.fed_comparisons[i])
        elif i in by_run:
            sums = by_run[i]
            empty = pd.DataFrame({"job_id": pd.Series(dtype=str), "status": pd.Series(dtype=str),
                                  "jct_s": pd.Series(dtype=float)})
            out.append(compare(sums, {lb: jobs.get((i, lb), empty) for lb in sums}, paper=paper_setup(run.resolved)))
        else:
            out.append(None)
    return out


def derived_migrations(data: ReportData) -> pd.DataFrame:
    """The migrations table the report's figures and error tables use: the raw rows with their run's
    columns, each run's degradation marks, the re-derived predictions, errors and concurrency."""
    from testbed.analysis import degradation
    from testbed.analysis.validation import add_concurrency, add_predictions

    m = data.migrations
    if not len(m):
        return pd.DataFrame()
    parts = []
    for i, g in m.groupby("run", sort=True):
        meta = data.run_meta(int(i))
        parts.append(degradation.mark(g.drop(columns=["run"]).assign(**meta), data.runs[int(i)].resolved))
    return add_concurrency(add_predictions(pd.concat(parts, ignore_index=True)))


def current_comparison(cmp):
    """A federated run's ``comparison.json`` with each policy's summary under today's names and units."""
    if not isinstance(cmp, dict) or not isinstance(cmp.get("policies"), dict):
        return cmp
    return {**cmp, "policies": {lb: current(s) if isinstance(s, dict) else s for lb, s in cmp["policies"].items()}}
