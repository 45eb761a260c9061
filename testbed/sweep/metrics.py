"""A sweep's ``metrics:`` names against the summary columns they must be: one problem line per bad name.

Checked twice with the same words: before any trial runs, against the numeric columns the base
scenario's study can write (:func:`testbed.studies.summary_metrics_for`), and after the trials,
against the summaries they wrote (a column a given run lacks, e.g. battery columns without a battery).
"""

from __future__ import annotations

from collections.abc import Mapping

from testbed.analysis.names import RENAMED
from testbed.suggest import did_you_mean


def metric_problems(wanted: list[str], numeric: Mapping[str, bool], where: str) -> list[tuple[str, str]]:
    """(``WHERE: metrics[i]``, message) for each name in ``wanted`` that is renamed, unknown or not
    numeric; ``numeric``: column -> whether its values are numbers."""
    problems = []
    for i, m in enumerate(wanted):
        field = f"{where}: metrics[{i}]"
        if m not in numeric and m in RENAMED:
            problems.append((field, f"{m!r} is now called {RENAMED[m]!r}"))
        elif m not in numeric:
            problems.append((field, f"no summary column {m!r}{did_you_mean(m, numeric)} "
                                    f"(known: {', '.join(sorted(numeric))})"))
        elif not numeric[m]:
            problems.append((field, f"summary column {m!r} is not numeric"))
    return problems
