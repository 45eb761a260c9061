"""``testbed report DIR [DIR ...]``: render report.md with figures from run and sweep directories."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="validation report (report.md + figures) from runs and sweeps")
    p.add_argument("dirs", nargs="+", type=Path, help="run directories (testbed run) and/or sweep directories (testbed sweep)")
    p.add_argument("--out", type=Path, default=None, help="where to write (default: DIR/report for one DIR); a new or empty directory, or an earlier "
                        "report (replaced); never anything else")
    p.add_argument("--title", default=None, help="title of the report (default: \"Validation report: \" and the input directories)")
    p.set_defaults(func=_report)


def _report(args: argparse.Namespace) -> int:
    import sys

    from testbed.errors import SpecError
    from testbed.recorder.out_dir import check_out_dir

    if args.out is None and len(args.dirs) > 1:
        raise SpecError([("--out", "required when more than one directory is given")])
    out = args.out or args.dirs[0] / "report"
    check_out_dir(out, kind="report", force=True, protect=args.dirs)  # before the heavy imports
    from testbed.analysis.report import build_report

    path = build_report(args.dirs, out, args.title, argv=sys.argv)
    print(f"report: {path}")
    return 0
