"""``index.html`` of a sweep directory (``testbed sweep``, ``testbed.sweep``): what ran, the statistics
table (mean, std and 95 % CI per cell, policy and metric), and the sweep's report (``testbed report``
on the sweep, kept in ``<sweep>/report/``): by-level panels with CIs, the claims over seeds, predicted
vs actual, and every other section the report has for the sweep's study, figures embedded."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from testbed.html.document import esc, page, table
from testbed.html.markdown import to_html
from testbed.recorder.reader import marker

REPORT_DIR = "report"


def _sweep_meta(sweep: Path) -> dict:
    return marker(sweep, "sweep", check_format=False)


def _trials(sweep: Path) -> pd.DataFrame:
    p = sweep / "trials.csv"
    return pd.read_csv(p, dtype={"cell": str, "dir": str}) if p.is_file() else pd.DataFrame()


def _report(sweep: Path, title: str, argv: list[str] | None) -> str:
    """The sweep's report rendered into ``<sweep>/report`` and shown here; or why there is none."""
    from testbed.analysis.report import build_report
    from testbed.analysis.validation import ReportError

    try:
        md = build_report([sweep], sweep / REPORT_DIR, title, argv=argv)
    except ReportError as e:
        return f'<p class="note">No report: {esc(e)}</p>'
    return to_html(md.read_text(encoding="utf-8"), md.parent, shift=1, skip_title=True)


def _cell(mean: float, ci: float, n: int) -> str:
    if mean != mean:
        return ""
    return f"{mean:.4g}" + (f" ± {ci:.2g}" if ci == ci else "") + f" ({int(n)})"


def compact_table(sweep: Path) -> str:
    """``table.csv`` as one row per cell and policy, one column per metric."""
    p = sweep / "table.csv"
    if not p.is_file():
        return "<p>No table was written.</p>"
    t = pd.read_csv(p, dtype={"cell": str})
    if not len(t):
        return "<p>No trial finished: the table is empty.</p>"
    params = [c for c in t.columns if c.startswith("param_")]
    distinct: list[str] = []
    for c in params:  # a zipped axis repeats another column: shown once
        if t[c].nunique(dropna=False) > 1 and not any(t[c].equals(t[d]) for d in distinct):
            distinct.append(c)
    policy = "label" if "label" in t.columns else "policy"
    key = (distinct or ["cell"]) + [policy]
    t = t.assign(value=[_cell(m, c, n) for m, c, n in zip(t["mean"], t["ci95"], t["n"])])
    wide = t.pivot_table(index=key, columns="metric", values="value", aggfunc="first", sort=False).reset_index()
    metrics = list(dict.fromkeys(t["metric"]))
    wide = wide[key + [m for m in metrics if m in wide.columns]]
    wide.columns = [str(c).removeprefix("param_") for c in wide.columns]
    return table(wide)


def build(sweep: Path, argv: list[str] | None = None) -> str:
    sweep = Path(sweep)
    meta = _sweep_meta(sweep)
    name = (meta.get("sweep") or {}).get("name") or sweep.name
    trials = _trials(sweep)
    from testbed.analysis.names import TRIAL_DONE

    done = int(trials["status"].isin(TRIAL_DONE).sum()) if len(trials) else 0
    failed = trials[~trials["status"].isin(TRIAL_DONE)] if len(trials) else trials
    scenario = Path(str((meta.get("scenario") or {}).get("path") or "")).name
    from testbed.analysis.sweep_tables import param_paths

    params = list(param_paths(sweep).values())  # as the sweep file names them
    title = f"Sweep: {name}"
    report = _report(sweep, f"Sweep {name}", argv)
    nav = ([("table", "Statistics table"), ("report", "Report")]
           + re.findall(r'<h3 id="([^"]+)">(.*?)</h3>', report) + ([("failed", "Failed trials")] if len(failed) else []))
    body = [f"<h1>{esc(title)}</h1>",
            f'<p class="meta">{esc(len(meta.get("cells") or []))} cells · {len(trials)} trials: {done} done, '
            f"{len(failed)} not · substrate {esc(meta.get('substrate', '?'))} · scenario <code>{esc(scenario)}</code>"
            f" · swept: {esc(', '.join(params) or 'nothing')} · made {esc(meta.get('created_utc', ''))}</p>",
            "<nav>" + "".join(f'<a href="#{a}">{h}</a>' for a, h in nav) + "</nav>"]
    body.append('<section id="table"><h2>Statistics table</h2>'
                "<p>Per cell and policy: mean ± half-width of the 95 % CI over seeds (n seeds); std and every "
                "number in <code>table.csv</code>, each trial's in <code>results.csv</code>.</p>"
                + compact_table(sweep) + "</section>")
    body.append(f'<section id="report"><h2>Report</h2><p>The sweep\'s report, also in <code>{REPORT_DIR}/report.md'
                f"</code> (<code>testbed report {esc(sweep)}</code> makes it again).</p>" + report + "</section>")
    if len(failed):
        rows = "".join(f"<tr><td>{esc(r['dir'])}</td><td>{esc(r['status'])}</td><td>{esc(r.get('error') or '')}</td></tr>"
                       for _, r in failed.iterrows())
        body.append('<section id="failed"><h2>Failed trials</h2><table><thead><tr><th>trial</th><th>status</th>'
                    f"<th>error</th></tr></thead><tbody>{rows}</tbody></table></section>")
    return page(title, "\n".join(body))
