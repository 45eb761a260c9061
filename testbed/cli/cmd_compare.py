"""``testbed compare A B [C ...]``: what differs between results directories (runs or sweeps; a
sweep counts as one side per cell), against the first (A): their resolved scenarios, path by path
(``links[0].bandwidth_gbps: 10 -> 5``), and per policy and metric the change with a 95 % CI,
paired by seed where the seeds match (unpaired or none where they do not, saying why).
``--csv FILE`` writes every row (the DataFrame ``testbed.compare`` returns)."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="scenario differences and per-metric changes (95 %% CI, paired by seed) "
                                       "between run and sweep directories")
    p.add_argument("dirs", nargs="+", metavar="DIR", help="results directories: runs (testbed run --out), sweeps "
                   "(testbed sweep --out; one side per cell) or a sweep's trials/<cell>; the first is the baseline")
    p.add_argument("--metric", action="append", default=None, metavar="NAME",
                   help="compare only this summary metric (repeatable; default: every numeric one)")
    p.add_argument("--policy", action="append", default=None, metavar="LABEL",
                   help="compare only this policy entry (repeatable; default: every one on both sides)")
    p.add_argument("--all", action="store_true", help="also list the metrics equal on both sides in every run")
    p.add_argument("--csv", type=Path, default=None, metavar="FILE", help="write every row (all metrics) to FILE")
    p.set_defaults(func=_compare)


def _compare(args: argparse.Namespace) -> int:
    from testbed.analysis.run_compare import text_report
    from testbed.api import _check_names, comparison_groups
    from testbed.errors import SpecError

    problems, groups = [], []
    for d in args.dirs:  # every bad directory named at once
        try:
            groups += comparison_groups(d)
        except SpecError as e:
            problems += e.problems
    if problems:
        raise SpecError(problems)
    if len(groups) < 2:
        raise SpecError([(args.dirs[0], "one run to compare with nothing: give a second results directory "
                                        "(or a sweep with two cells or more)")])
    from testbed.analysis.run_compare import compare_groups

    df = compare_groups(groups, metrics=args.metric, policies=args.policy)
    _check_names(df, groups, args.metric, args.policy)
    print(text_report(df, groups, all_metrics=args.all))
    if args.csv is not None:
        df.to_csv(args.csv, index=False)
        print(f"\nrows: {args.csv}")
    return 0
