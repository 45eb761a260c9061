"""``testbed clean [--run ID] [--force]``: remove leftovers of our runs only."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("clean", help="remove leftover namespaces/interfaces/cgroups/processes of testbed runs (ours only)")
    p.add_argument("--run", default=None, help="only this run id")
    p.add_argument("--force", action="store_true", help="also runs whose owner process is still alive")
    p.set_defaults(func=_clean)


def _clean(args: argparse.Namespace) -> int:
    from testbed.errors import SpecError
    from testbed.netem.clean import clean
    from testbed.netem.naming import RUN_ID_RE
    from testbed.netem.fabric import require_root

    if args.run is not None and not RUN_ID_RE.match(args.run):
        raise SpecError([("--run", f"not a run id (6 characters [a-z0-9]): {args.run!r}")])
    require_root("testbed clean")
    reports = clean(args.run, force=args.force)
    if not reports:
        print("nothing to clean")
    for r in reports:
        if r.skipped:
            print(f"{r.run_id}: skipped: {r.skipped}")
        else:
            print(f"{r.run_id}: removed {len(r.namespaces)} namespace(s), {len(r.interfaces)} interface(s), "
                  f"{len(r.cgroups)} cgroup(s), stopped {len(r.pids)} process(es)")
    return 0
