"""``testbed clean [--run ID] [--force]``: remove leftovers of our runs only (what their state files list)."""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("clean", help="remove what crashed testbed runs left (only what their state files list)",
                       description=(
                           "Remove what testbed runs left behind (namespaces, interfaces, cgroups, processes, partial "
                           "results), only what each run's state file under /run/testbed lists. Without --run: every "
                           "run whose owner process is gone; a run whose owner is alive (another user's, or one still "
                           "running) is skipped unless --force. A run's id is printed when `testbed run` starts an "
                           "emulation and listed by `testbed net status`."))
    p.add_argument("--run", default=None, help="only this run id (6 characters, printed when the run started)")
    p.add_argument("--force", action="store_true", help="also runs whose owner process is still alive")
    p.set_defaults(func=_clean)


def _clean(args: argparse.Namespace) -> int:
    from testbed.errors import SpecError
    from testbed.netem.owned.clean import clean, strays
    from testbed.netem.fabric import require_root
    from testbed.netem.owned.naming import RUN_ID_RE

    if args.run is not None and not RUN_ID_RE.match(args.run):
        raise SpecError([("--run", f"not a run id (6 characters [a-z0-9]): {args.run!r}")])
    require_root("testbed clean")
    reports = clean(args.run, force=args.force)
    if not args.run:
        for s in strays():
            print(f"warning: {s.path}: not a testbed state file ({s.reason}); left alone", file=sys.stderr)
    if not reports:
        print("nothing to clean")
    failed = False
    for r in reports:
        if r.skipped:
            print(f"{r.run_id}: skipped: {r.skipped}")
            continue
        print(f"{r.run_id}: removed {len(r.namespaces)} namespace(s), {len(r.interfaces)} interface(s), "
              f"{len(r.cgroups)} cgroup(s), {len(r.paths)} file(s)/folder(s), stopped {len(r.pids)} process(es)")
        for why in r.refused:
            print(f"warning: {r.run_id}: {why}; left alone", file=sys.stderr)
        for err in r.errors:
            print(f"error: {r.run_id}: {err}", file=sys.stderr)
        failed = failed or bool(r.errors)
    return 1 if failed else 0
