"""A sweep's ``metrics:`` names against the summary columns they must be: one problem line per bad name.

Checked before any trial runs, against the numeric columns the base scenario's study can write
(:func:`testbed.studies.summary_metrics_for`): a misspelt or renamed name never costs a trial. Some
of those columns are optional (``co2_kg`` needs a carbon trace, the battery columns a battery): a
study whose runs lack one still gets its table, with NaN in that column. After the trials the same
words name a column the runs wrote with values that are not numbers, or (for a study that does not
declare its columns) one no run wrote.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from testbed.analysis.names import CONVERTED, RENAMED, current_name, factor_to_today
from testbed.suggest import did_you_mean


def metric_problems(wanted: list[str], numeric: Mapping[str, bool], where: str,
                    optional: Collection[str] = ()) -> list[tuple[str, str]]:
    """(``WHERE: metrics[i]``, message) for each name in ``wanted`` that is renamed, unknown or not
    numeric; ``numeric``: column -> whether its values are numbers. A name in ``optional`` (the
    study declares it) that ``numeric`` lacks is no problem: the runs did not write it (NaN)."""
    problems = []
    for i, m in enumerate(wanted):
        field = f"{where}: metrics[{i}]"
        if m not in numeric and m in optional:
            continue
        if m not in numeric and (m in RENAMED or m in CONVERTED) and (current_name(m) in numeric
                                                                   or current_name(m) in optional):
            unit = f", in its unit (x {factor_to_today(m):g})" if m in CONVERTED else ""
            problems.append((field, f"{m!r} is now called {current_name(m)!r}{unit}"))
        elif m not in numeric:
            problems.append((field, f"no summary column {m!r}{did_you_mean(m, numeric)} "
                                    f"(known: {', '.join(sorted(numeric))})"))
        elif not numeric[m]:
            problems.append((field, f"summary column {m!r} is not numeric"))
    return problems
