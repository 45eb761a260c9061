"""``testbed report DIR [DIR ...]``: render report.md with figures from run and sweep directories;
``--check REPORT`` re-derives a report from its stored data and fails on any difference;
``--rebuild REPORT`` renders it again from that data with this checkout's code."""

from __future__ import annotations

import argparse
from pathlib import Path

from testbed.cli import figure_options


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="validation report (report.md + figures) from runs and sweeps; --check re-derives one")
    p.add_argument("dirs", nargs="+", type=Path, help="run directories (testbed run) and/or sweep directories (testbed sweep); "
                        "with --check or --rebuild: report directories, or a folder holding reports")
    p.add_argument("--out", type=Path, default=None, help="where to write (default: DIR/report for one DIR); a new or empty directory, or an earlier "
                        "report (replaced); never anything else")
    p.add_argument("--title", default=None, help="title of the report (default: \"Validation report: \" and the input directories)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="re-derive each report from the data kept beside it (REPORT/data) and "
                      "fail (exit 1) on any difference in its tables or verdicts, a claim not measured although its "
                      "scenario ran the policy, runs from a dirty tree or from several commits, or a change since then "
                      "in the code that judges results")
    mode.add_argument("--rebuild", action="store_true", help="render each report again from its stored data with this "
                      "checkout's code (after a change in how results are judged), in place")
    p.add_argument("--strict", action="store_true", help="with --check: also fail when the code or inputs that produced "
                   "the runs changed since their commit (stale results)")
    figure_options.add(p)
    p.set_defaults(func=_report)


def _report(args: argparse.Namespace) -> int:
    import sys

    from testbed.errors import SpecError
    from testbed.recorder.out_dir import check_out_dir

    if args.strict and not args.check:
        raise SpecError([("--strict", "only with --check")])
    if args.check or args.rebuild:
        given = [f for f, v in (("--out", args.out), ("--title", args.title), ("--figure-format", args.figure_format),
                                ("--figure-style", args.figure_style)) if v is not None]
        if given:  # a report is checked and rebuilt in the format it was made in (report.json)
            raise SpecError([(given[0], "not with --check or --rebuild")])
        return _check(args.dirs, args.strict) if args.check else _rebuild(args.dirs)
    figures = figure_options.applied(args)
    if args.out is None and len(args.dirs) > 1:
        raise SpecError([("--out", "required when more than one directory is given")])
    out = args.out or args.dirs[0] / "report"
    check_out_dir(out, kind="report", force=True, protect=args.dirs)  # before the heavy imports
    from testbed.analysis.report import build_report

    with figures:
        path = build_report(args.dirs, out, args.title, argv=sys.argv)
    print(f"report: {path}")
    return 0


def _check(dirs: list[Path], strict: bool) -> int:
    from testbed.analysis.report_check import check_report, check_sweep_tables, report_dirs

    failed = 0
    for d in dirs:
        if not (Path(d) / "report.json").is_file():  # a folder of reports: its sweeps' tables too
            sweeps = check_sweep_tables(Path(d))
            for line in sweeps.problems:
                print(f"error: {line}")
            print(f"{d}: sweep tables {'FAILED' if sweeps.problems else 'ok'} ({len(sweeps.problems)} problem"
                  f"{'s' * (len(sweeps.problems) != 1)})")
            failed += bool(sweeps.problems)
        for rep in report_dirs(d):
            res = check_report(rep)
            problems = list(res.problems)
            if res.stale:
                note = (f"{rep}: stale: {len(res.stale)} files of the code or inputs that produced its runs changed "
                        f"since their commit (e.g. {res.stale[0]})")
                (problems.append if strict else print)(note if strict else f"warning: {note}")
            for line in problems:
                print(f"error: {line}")
            print(f"{rep}: {'FAILED' if problems else 'ok'} ({len(problems)} problem{'s' * (len(problems) != 1)})")
            failed += bool(problems)
    return 1 if failed else 0


def _rebuild(dirs: list[Path]) -> int:
    from testbed.analysis.report_check import rebuild, report_dirs

    for d in dirs:
        for rep in report_dirs(d):
            print(f"report: {rebuild(rep)}")
    return 0
