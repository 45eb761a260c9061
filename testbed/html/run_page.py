"""``index.html`` of a run's results directory (``testbed run``, ``testbed.run``, a sweep's trial).

Migration study: the comparison table, energy and JCT per policy, the migrations on a map of the
sites (arcs coloured by outcome), predicted vs realised (measured or modelled) migration times, per-site timelines, each
policy's energy mix and power caps. Federated (PowerTrip) study: the comparison table, accuracy vs
time, sites selected per round, the three clocks, projected vs measured gain, energy per policy,
the sites on a map with how often the PowerTrip run (else the first) selected each, and that run's
per-site timeline. The figures this page adds are written beside the others, in the run's figure
format. Without figures (``--no-plots``: a sweep's trials) the page has the tables only."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from testbed.analysis.figures import figure_path, find
from testbed.analysis.titles import words
from testbed.html import INDEX
from testbed.html.document import esc, figure, grid, page, table, write_atomic
from testbed.html.markdown import to_html
from testbed.recorder.reader import marker

MAX_MIGRATION_ROWS = 40


def _manifest(run: Path) -> dict:
    return marker(run, "run", check_format=False)


def _resolved(man: dict) -> dict:
    scen = man.get("scenario") if isinstance(man.get("scenario"), dict) else {}
    return scen.get("resolved") if isinstance(scen.get("resolved"), dict) else {}


def _labels(run: Path) -> list[str]:
    """Policy folders in the comparison's order (comparison.json), else by name."""
    try:
        cmp = json.loads((run / "comparison.json").read_text(encoding="utf-8"))
        pols = cmp.get("policies")
        order = list(pols) if isinstance(pols, dict) else [p.get("label") for p in pols or [] if isinstance(p, dict)]
    except (OSError, ValueError, AttributeError):
        order = []
    found = sorted(d.name for d in run.iterdir() if d.is_dir() and (d / "summary.json").is_file())
    return [lb for lb in order if lb in found] + [lb for lb in found if lb not in order]


def _read(run: Path, label: str, table_name: str) -> pd.DataFrame:
    p = run / label / f"{table_name}.parquet"
    return pd.read_parquet(p) if p.is_file() else pd.DataFrame()


def header(man: dict, title: str) -> str:
    res = _resolved(man)
    sub = man.get("substrate") or {}
    wall = man.get("wall_s") or {}
    bits = [f"seed {man.get('seed', '?')}", f"substrate {sub.get('substrate', '?')}",
            f"{len(wall)} runs" if wall else "", f"{sum(wall.values()):.0f} s wall" if wall else "",
            f"made {man.get('created_utc', '')}" if man.get("created_utc") else ""]
    desc = f"<p>{esc(res['description'])}</p>" if res.get("description") else ""
    return f"<h1>{esc(title)}</h1><p class=\"meta\">{esc(' · '.join(b for b in bits if b))}</p>{desc}"


def _section(anchor: str, heading: str, body: str) -> str:
    return f'<section id="{anchor}"><h2>{esc(heading)}</h2>\n{body}\n</section>' if body else ""


def _nav(sections: list[tuple[str, str]]) -> str:
    return "<nav>" + "".join(f'<a href="#{a}">{esc(h)}</a>' for a, h in sections) + "</nav>"


def _comparison(run: Path) -> str:
    md = run / "comparison.md"
    return to_html(md.read_text(encoding="utf-8"), run, shift=1, skip_title=True) if md.is_file() else ""


def _migration_sections(run: Path, man: dict, labels: list[str]) -> list[tuple[str, str, str]]:
    from testbed.analysis import validation as v
    from testbed.html.site_map import migration_map, site_coords
    from testbed.html.timelines import job_timelines

    res = _resolved(man)
    out = []
    out.append(("energy", "Energy and job completion per policy",
                grid(figure(find(run, "energy_by_policy"), "Renewable and grid energy per policy"),
                     figure(find(run, "jct_cdf"), "Job completion time, every policy"))))
    migs = {lb: _read(run, lb, "migrations") for lb in labels}
    xy, note = site_coords(res.get("sites") or [])
    if xy:
        path = migration_map(xy, migs, figure_path(run / "site_map.png"), "Migrations between the sites, per policy",
                             note)
        out.append(("map", "Migrations on a map", figure(path, "Arc: source to destination; colour: outcome; "
                                                               "width: number of migrations")))
    try:
        m = v.gather(v.find_runs(run))[0]
    except (OSError, ValueError, KeyError, v.ReportError) as e:  # a run written by an older testbed
        m = pd.DataFrame()
        out.append(("pred", "Predicted vs realised migration time",
                    f'<p class="note">not derived: {esc(type(e).__name__)}: {esc(e)}</p>'))
    if len(m):
        path = v.scatter_pred_vs_actual(m, figure_path(run / "pred_vs_actual.png"),
                                        f"Predicted vs {v.realised_word(m, 'total')} migration time (completed migrations)")
        from testbed.analysis.outcomes import basis, outcome_s
        from testbed.html.site_map import outcome

        rows = m.assign(outcome=outcome(m), outcome_total_s=outcome_s(m, "total"), outcome_basis=basis(m, "total"))
        cols = [c for c in ("label", "job_id", "src", "dst", "t_decision_s", "checkpoint_gb", "status", "outcome",
                            "predicted_total_s", "outcome_total_s", "outcome_basis", "predicted_budget_s",
                            "true_budget_s") if c in rows]
        more = (f"<p>The first {MAX_MIGRATION_ROWS} of {len(rows)} migrations; every one is in "
                "<code>&lt;policy&gt;/migrations.parquet</code>.</p>" if len(rows) > MAX_MIGRATION_ROWS else "")
        out.append(("pred", "Predicted vs realised migration time",
                    figure(path, "Both predictions use only what the controller knew (size, predicted bandwidth)")
                    + table(rows[cols].head(MAX_MIGRATION_ROWS)) + more))
    elif not any(s[0] == "pred" for s in out):
        out.append(("pred", "Predicted vs realised migration time", "<p>No policy migrated a job in this run.</p>"))
    ts = {lb: _read(run, lb, "timeseries") for lb in labels}
    ts = {lb: df for lb, df in ts.items() if len(df) and {"site", "running", "t_s"} <= set(df.columns)}
    if ts:
        path = job_timelines(ts, figure_path(run / "site_timelines.png"),
                             "Jobs running at each site under each policy, with the site's renewable power")
        out.append(("timelines", "Per-site timelines", figure(path)))
    out.append(("mix", "Energy mix per site", "".join(figure(find(run / lb, "energy_mix"), words(lb)) for lb in labels)))
    out.append(("caps", "Power caps", "".join(figure(find(run / lb, "power_caps"), words(lb)) for lb in labels)))
    return out


def _federated_sections(run: Path, man: dict, labels: list[str]) -> list[tuple[str, str, str]]:
    from testbed.analysis.names import current
    from testbed.analysis.plots import energy_by_policy
    from testbed.html.site_map import selection_map, site_coords
    from testbed.html.timelines import selection_timeline

    res = _resolved(man)
    out = [("accuracy", "Accuracy over time", figure(find(run, "accuracy_vs_time"), "Test accuracy vs scenario time")
            + figure(find(run, "straggler_vs_pooled"), "The same rounds under the three clocks")),
           ("selection", "Sites selected", figure(find(run, "sites_selected"), "Sites selected per round")
            + figure(find(run, "gain_projection"), "Projected vs measured accuracy gain per round"))]
    sums = {}
    for lb in labels:
        s = current(json.loads((run / lb / "summary.json").read_text(encoding="utf-8")))
        if not s.get("best_of") and s.get("renewable_kwh") is not None and s.get("grid_kwh") is not None:
            sums[lb] = s
    if sums:
        path = energy_by_policy(sums, figure_path(run / "energy_by_policy.png"), "Energy per policy")
        out.append(("energy", "Energy mix", figure(path, "Renewable and grid energy of each run")))
    pick = next((lb for lb in labels if lb.startswith("powertrip") and len(_read(run, lb, "sites"))),
                next((lb for lb in labels if len(_read(run, lb, "sites"))), None))
    if pick is not None:
        sites, rounds = _read(run, pick, "sites"), _read(run, pick, "rounds")
        xy, note = site_coords(res.get("sites") or [])
        agg = ((res.get("federated") or {}).get("aggregator")) or ""
        if xy:
            path = selection_map(xy, agg, sites["site"].value_counts(), figure_path(run / "site_map.png"),
                                 f"Sites and the aggregator; links by how often {words(pick)} selected each", note)
            out.append(("map", "Sites on a map", figure(path)))
        path = selection_timeline(sites, rounds, figure_path(run / "site_timelines.png"),
                                  f"Rounds each site trained in under {words(pick)}")
        out.append(("timelines", "Per-site timelines", figure(path)))
    return out


def build(run: Path, *, plots: bool = True) -> str:
    """The page of the run in ``run`` (a complete results directory), as text."""
    run = Path(run)
    man = _manifest(run)
    res = _resolved(man)
    federated = bool(res.get("federated"))
    labels = _labels(run)
    sections = [("comparison", "Comparison", _comparison(run) or "<p>No comparison was written.</p>")]
    if plots:
        sections += (_federated_sections if federated else _migration_sections)(run, man, labels)
    else:
        sections.append(("figures", "Figures", "<p>This run drew no figures (<code>--no-plots</code>, as a sweep's "
                                               "trials do): its tables are beside this page.</p>"))
    sections = [s for s in sections if s[2]]
    study = "federated (PowerTrip) study" if federated else "migration study"
    title = f"Run: {res.get('name') or run.name}"
    body = (header(man, title) + f'<p class="meta">{esc(study)}; policies: {esc(", ".join(labels))}</p>'
            + _nav([(a, h) for a, h, _ in sections]) + "".join(_section(*s) for s in sections))
    return page(title, body)


def write(run: Path, *, plots: bool = True) -> Path:
    """Write ``run/index.html`` (atomically)."""
    return write_atomic(Path(run) / INDEX, build(run, plots=plots))
