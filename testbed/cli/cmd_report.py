"""``testbed report DIR [DIR ...]``: render report.md with figures from run and sweep directories."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="validation report (report.md + figures) from runs and sweeps")
    p.add_argument("dirs", nargs="+", type=Path, help="run directories (testbed run) and/or sweep directories (testbed sweep)")
    p.add_argument("--out", type=Path, default=None, help="where to write (default: DIR/report for one DIR)")
    p.add_argument("--title", default=None)
    p.set_defaults(func=_report)


def _report(args: argparse.Namespace) -> int:
    from testbed.analysis.report import build_report
    from testbed.errors import SpecError

    if args.out is None and len(args.dirs) > 1:
        raise SpecError([("--out", "required when more than one directory is given")])
    out = args.out or args.dirs[0] / "report"
    path = build_report(args.dirs, out, args.title)
    print(f"report: {path}")
    return 0
