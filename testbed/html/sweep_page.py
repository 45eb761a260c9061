"""``index.html`` of a sweep directory (``testbed sweep``, ``testbed.sweep``): what ran, the statistics
table (mean, std and 95 % CI per cell, policy and metric), and the sweep's report (``testbed report``
on the sweep, kept in ``<sweep>/report/``): by-level panels with CIs, the claims over seeds, predicted
vs actual, and every other section the report has for the sweep's study, figures embedded."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from testbed.html.document import esc, page
from testbed.html.markdown import to_html

REPORT_DIR = "report"


def _sweep_meta(sweep: Path) -> dict:
    try:
        meta = json.loads((sweep / "sweep.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"{sweep}: no readable sweep.json ({type(e).__name__})") from None
    return meta if isinstance(meta, dict) else {}


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


def build(sweep: Path, argv: list[str] | None = None) -> str:
    sweep = Path(sweep)
    meta = _sweep_meta(sweep)
    name = (meta.get("sweep") or {}).get("name") or sweep.name
    trials = _trials(sweep)
    from testbed.analysis.names import TRIAL_DONE

    done = int(trials["status"].isin(TRIAL_DONE).sum()) if len(trials) else 0
    failed = trials[~trials["status"].isin(TRIAL_DONE)] if len(trials) else trials
    scenario = Path(str((meta.get("scenario") or {}).get("path") or "")).name
    params = meta.get("param_columns") or []
    title = f"Sweep: {name}"
    body = [f"<h1>{esc(title)}</h1>",
            f'<p class="meta">{esc(len(meta.get("cells") or []))} cells · {len(trials)} trials: {done} done, '
            f"{len(failed)} not · substrate {esc(meta.get('substrate', '?'))} · scenario <code>{esc(scenario)}</code>"
            f" · swept: {esc(', '.join(params) or 'nothing')} · made {esc(meta.get('created_utc', ''))}</p>",
            '<nav><a href="#table">Statistics table</a><a href="#report">Report</a>'
            + ('<a href="#failed">Failed trials</a>' if len(failed) else "") + "</nav>"]
    table_md = sweep / "table.md"
    body.append('<section id="table"><h2>Statistics table</h2>'
                + (to_html(table_md.read_text(encoding="utf-8"), sweep, shift=1, skip_title=True)
                   if table_md.is_file() else "<p>No table was written.</p>") + "</section>")
    body.append(f'<section id="report"><h2>Report</h2><p>The sweep\'s report, also in <code>{REPORT_DIR}/report.md'
                f"</code> (<code>testbed report {esc(sweep)}</code> makes it again).</p>"
                + _report(sweep, f"Sweep {name}", argv) + "</section>")
    if len(failed):
        rows = "".join(f"<tr><td>{esc(r['dir'])}</td><td>{esc(r['status'])}</td><td>{esc(r.get('error') or '')}</td></tr>"
                       for _, r in failed.iterrows())
        body.append('<section id="failed"><h2>Failed trials</h2><table><thead><tr><th>trial</th><th>status</th>'
                    f"<th>error</th></tr></thead><tbody>{rows}</tbody></table></section>")
    return page(title, "\n".join(body))
