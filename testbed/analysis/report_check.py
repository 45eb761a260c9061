"""``testbed report --check DIR``: re-derive a committed report from the data stored beside it and
say what does not hold.

A report (``testbed report``) keeps what it was derived from in ``data/`` (testbed.analysis.report_data).
The check renders the report again from that data with the code of this checkout and fails on:

- any difference in ``report.md`` or a CSV table (a number edited by hand, a summary key renamed in
  the code without regenerating, a change in how a verdict is reached);
- a claim row that says "not measured" where the runs' scenario has the policy;
- runs made from a dirty tree (or with no recorded commit), runs made at more than one commit, a
  report made from a dirty tree;
- code that judges results (``JUDGING_CODE``) changed since the commit that made the report.

Code that *produces* results (the rest of the package but ``TOOL_CODE``, scenarios, traces) changed
since the runs' commit is listed as stale; with ``strict`` that fails too. DIR is a report, or a folder whose
immediate sub-folders hold reports (``results/reference``): each is checked.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import testbed
from testbed.analysis.report_data import DATA_DIR, ReportData
from testbed.analysis.validation import ReportError

JUDGING_CODE = ("testbed/analysis", "testbed/stats.py", "testbed/feasibility.py")
TOOL_CODE = ("testbed/bench", "testbed/vm", "testbed/cli/cmd_bench.py", "testbed/cli/cmd_vm.py")
"""Code no run imports: the benchmarks (``testbed bench``) and the qemu guest's runner (``testbed vm``)
with their commands. A change there cannot change a run's results, so it leaves a report fresh.
tests/unit/analysis/test_report_check.py holds that no other module imports them (but ``testbed
net``'s command) and that a run on sim and a sweep never load them; an integration test does the
same for a run on netns."""
PRODUCING_CODE = ("testbed", "scenarios", "sweeps", "traces", "topologies", "pyproject.toml",
                  *(f":(exclude){p}" for p in JUDGING_CODE + TOOL_CODE))
SUBSTRATE_PACKAGES = {"sim": "testbed/substrate/sim/", "netns": "testbed/substrate/netns/",
                      "mininet": "testbed/substrate/mininet/", "local": "testbed/substrate/local/"}
"""Code only the runs of one substrate import: a change under another substrate's package (not its
``__init__.py``, which every run imports to register it) cannot change a report whose runs never used
that substrate. A substrate not listed here counts as producing code for every report."""
_COMPARED = (".md", ".csv")  # the report's text outputs (figures are re-drawn, not compared)


@dataclass
class CheckResult:
    report: Path
    problems: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)  # producing code changed since the runs' commit


def report_dirs(directory: Path) -> list[Path]:
    """``directory`` if it is a report, else its immediate sub-folders that are."""
    directory = Path(directory)
    if not directory.is_dir():
        raise ReportError(f"{directory}: not a directory")
    if (directory / "report.json").is_file():
        return [directory]
    found = sorted(d for d in directory.iterdir() if (d / "report.json").is_file())
    if not found:
        raise ReportError(f"{directory}: neither a report (report.json) nor a folder holding reports")
    return found


def _repo() -> Path:
    return Path(testbed.__file__).resolve().parent.parent


def _git(*args: str) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(["git", "-C", str(_repo()), *args], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None


def changed_since(commit: str, paths: tuple[str, ...]) -> list[str] | None:
    """Files under ``paths`` that differ between ``commit`` and this checkout's working tree (None if
    git cannot tell: no git, not a repository, or the commit is not in its history)."""
    r = _git("diff", "--name-only", commit, "--", *paths)
    if r is None or r.returncode != 0:
        return None
    return [line for line in r.stdout.splitlines() if line.strip()]


def _first_difference(a: str, b: str) -> int:
    la, lb = a.splitlines(), b.splitlines()
    for i, (x, y) in enumerate(zip(la, lb), 1):
        if x != y:
            return i
    return min(len(la), len(lb)) + 1


def _compare_outputs(committed: Path, fresh: Path, res: CheckResult) -> None:
    made = {p.relative_to(fresh) for p in fresh.rglob("*") if p.suffix in _COMPARED and p.is_file()}
    kept = {p.relative_to(committed) for p in committed.rglob("*") if p.suffix in _COMPARED and p.is_file()
            and DATA_DIR not in p.relative_to(committed).parts}
    for rel in sorted(made - kept):
        res.problems.append(f"{committed / rel}: missing (its data gives one)")
    for rel in sorted(kept - made):
        res.problems.append(f"{committed / rel}: its data gives no such file")
    for rel in sorted(made & kept):
        a = (committed / rel).read_text(encoding="utf-8", errors="replace")
        b = (fresh / rel).read_text(encoding="utf-8", errors="replace")
        if a != b:
            res.problems.append(f"{committed / rel}: line {_first_difference(a, b)} differs from what its stored "
                                "data gives with this code")


def _provenance(meta: dict, data: ReportData, res: CheckResult) -> None:
    where = res.report
    dirty = [i for i, g in enumerate(data.git) if g.get("dirty") is not False or not g.get("commit")]
    if dirty:
        res.problems.append(f"{where}: {len(dirty)} of {len(data.runs)} runs were made from a dirty tree or "
                            f"record no commit (first: {data.runs[dirty[0]].path})")
    commits = sorted({g.get("commit") for g in data.git if g.get("commit")})
    if len(commits) > 1:
        res.problems.append(f"{where}: runs made at {len(commits)} commits ({', '.join(c[:10] for c in commits)}); "
                            "a reference is made at one")
    git = meta.get("git") if isinstance(meta.get("git"), dict) else {}
    if git.get("dirty") is not False or not git.get("commit"):
        res.problems.append(f"{where}: the report was made from a dirty tree or records no commit")
    elif (judging := changed_since(git["commit"], JUDGING_CODE)) is None:
        res.problems.append(f"{where}: cannot compare the code that judged it ({git['commit'][:10]}) with this "
                            "checkout's (no git history here)")
    elif judging:
        res.problems.append(f"{where}: the code that judges results changed since the report was made at "
                            f"{git['commit'][:10]} ({len(judging)} files, e.g. {judging[0]}): rebuild it "
                            f"(testbed report --rebuild {where})")
    if len(commits) == 1:
        produced = changed_since(commits[0], PRODUCING_CODE)
        if produced:
            res.stale = producing_for({r.substrate for r in data.runs}, produced)


def producing_for(substrates: set[str], changed: list[str]) -> list[str]:
    """Of the ``changed`` files, those that could change runs on ``substrates``: all but the files of
    the other substrates' own packages (:data:`SUBSTRATE_PACKAGES`)."""
    others = [pkg for name, pkg in SUBSTRATE_PACKAGES.items() if name not in substrates]
    return [f for f in changed
            if not any(f.startswith(pkg) and f != f"{pkg}__init__.py" for pkg in others)]


def _unmeasured(data: ReportData, comps: list, res: CheckResult) -> None:
    """A claim row that says "not measured" while the scenario ran the policy."""
    import numpy as np

    from testbed.analysis import claims
    from testbed.analysis import compare as cmp

    paper, _, _ = claims.run_groups(data.runs, comps)
    scen = {(r.scenario, r.substrate, r.cell): r.resolved for r in data.runs}
    wanted = [(text, policy, metric) for _, text, _, _, policy, metric in cmp.PAPER_CLAIMS]
    for key, group in sorted(paper.items()):
        names = {p.get("name") if isinstance(p, dict) else p for p in scen[key].get("policies") or []}
        for text, policy, metric in wanted:
            if policy not in names:
                continue
            lb = next((x for x in (claims._label(c["policies"], policy) for c in group) if x), None)
            a, b = claims._change(group, lb, metric) if lb else (np.array([]), np.array([]))
            if not np.isfinite(claims._pct(a, b)).any():
                res.problems.append(f"{res.report}: claim '{text}' is not measured for {key[0]} ({key[1]}"
                                    f"{', cell ' + key[2] if key[2] else ''}) although its scenario runs {policy}")


def _figures_as(meta: dict):
    """Figures in the format the report was made with (report.json's ``figure_format``; png when absent)."""
    from testbed.analysis.figures import figure_output

    fmt = meta.get("figure_format")
    return figure_output(fmt if fmt in ("png", "svg", "pdf") else "png")


def check_report(report: Path) -> CheckResult:
    from testbed.analysis.report import render
    from testbed.analysis.report_data import comparisons

    res = CheckResult(Path(report))
    try:
        meta = json.loads((report / "report.json").read_text())
    except (OSError, ValueError):
        res.problems.append(f"{report / 'report.json'}: not readable")
        return res
    if not (report / DATA_DIR / "runs.json.gz").is_file():
        res.problems.append(f"{report}: keeps no data to re-derive it from ({DATA_DIR}/ is missing): it was made "
                            "by an older testbed; make it again from its runs")
        return res
    if not isinstance(meta.get("title"), str):
        res.problems.append(f"{report / 'report.json'}: records no title")
        return res
    data = ReportData.load(report / DATA_DIR)
    with tempfile.TemporaryDirectory(prefix="tb-report-check-") as tmp, _figures_as(meta):
        render(data, Path(tmp), meta["title"])
        _compare_outputs(Path(report), Path(tmp), res)
    _unmeasured(data, [c for c in comparisons(data)], res)
    _provenance(meta, data, res)
    return res


def check_sweep_tables(directory: Path) -> CheckResult:
    """The sweep folders beside the reports of ``directory`` (results/reference: ``NAME/results.csv`` and
    ``NAME/table.csv``): every number of ``results.csv`` is the stored summary of the same run (source
    ``NAME``, cell, seed) and policy in a report's data, and ``table.csv`` re-derives from ``results.csv``
    (n, mean, std, 95 % CI per cell, policy and metric). Rows of a ``static_k`` list's best-of summary,
    which a report does not store, are checked through the per-k rows they were chosen from."""
    import numpy as np
    import pandas as pd

    from testbed.analysis.sweep_tables import read_results, read_table
    from testbed.stats import mean_ci95

    res = CheckResult(Path(directory))
    stored: dict[tuple[str, str, int, str], dict] = {}
    for rep in report_dirs(directory):
        try:
            data = ReportData.load(rep / DATA_DIR)
        except ReportError:
            continue  # check_report says so
        for srow in data.summaries:
            run = data.runs[srow["run"]]
            stored[(data.sources[srow["run"]], run.cell, run.seed, srow["label"])] = srow["summary"]
        for i, comp in data.fed_comparisons.items():  # the federated study keeps its summaries there
            run = data.runs[i]
            for label, summary in ((comp or {}).get("policies") or {}).items():
                stored[(data.sources[i], run.cell, run.seed, label)] = summary
    sources = {k[0] for k in stored}
    for sweep in sorted(d for d in Path(directory).iterdir() if (d / "results.csv").is_file()):
        where = f"{sweep.name}/results.csv"
        if sweep.name not in sources:
            res.problems.append(f"{where}: its runs are in no report's data here, so its tables cannot be re-checked")
            continue
        results = read_results(sweep)
        metrics = [c for c in results.columns if c in _metric_columns(sweep)]
        checked = 0
        for _, row in results.iterrows():
            summary = stored.get((sweep.name, str(row["cell"]), int(row["seed"]), str(row["label"])))
            if summary is None:
                if str(row["policy"]) == "static_k":
                    continue  # a list's best-of summary: its per-k rows are checked
                res.problems.append(f"{where}: cell {row['cell']} seed {row['seed']} {row['label']}: no such run "
                                    "and policy in a report's data")
                continue
            for m in metrics:
                want = summary.get(m)
                got = row[m]
                want = np.nan if want is None else float(want)
                if not (np.isnan(got) and np.isnan(want)) and not np.isclose(got, want, rtol=1e-9, atol=0.0):
                    res.problems.append(f"{where}: cell {row['cell']} seed {row['seed']} {row['label']} {m}: "
                                        f"{got!r} here, {want!r} in the report's data")
            checked += 1
        if not checked:
            res.problems.append(f"{where}: no row matches a run in a report's data")
        table = read_table(sweep, results)
        for _, t in table.iterrows():
            group = results[(results["cell"] == t["cell"]) & (results["label"] == t["label"])]
            if t["metric"] not in group:
                res.problems.append(f"{sweep.name}/table.csv: metric {t['metric']} is not in results.csv")
                continue
            derived = mean_ci95(group[t["metric"]].to_numpy(dtype=float))  # the sweep table's own rule
            for name, want in zip(("n", "mean", "std", "ci95"), derived):
                got = float(t[name])
                if not (np.isnan(got) and np.isnan(want)) and not np.isclose(got, want, rtol=1e-9, atol=0.0):
                    res.problems.append(f"{sweep.name}/table.csv: cell {t['cell']} {t['label']} {t['metric']} "
                                        f"{name}: {got!r}, re-derived from results.csv {want!r}")
                    break
    return res


def _metric_columns(sweep: Path) -> set[str]:
    """The metric columns of a sweep's results.csv (its table.csv's metrics)."""
    import pandas as pd

    return set(pd.read_csv(sweep / "table.csv", usecols=["metric"])["metric"])


def rebuild(report: Path) -> Path:
    """Render the report again from its stored data with this checkout's code (after a change to the
    code that judges results), in place; report.json records this commit as the judging one."""
    from datetime import datetime, timezone

    from testbed.analysis.report import render
    from testbed.recorder.manifest import git_state
    from testbed.recorder.writer import atomic_dir, write_json

    report = Path(report)
    meta = json.loads((report / "report.json").read_text())
    data = ReportData.load(report / DATA_DIR)
    with atomic_dir(report, True, kind="report") as tmp, _figures_as(meta):
        render(data, tmp, meta["title"])
        data.save(tmp / DATA_DIR)
        write_json(tmp / "report.json", {**meta, "rebuilt_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                                         "git": git_state()})
    return report / "report.md"
