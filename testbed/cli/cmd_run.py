"""``testbed run SCENARIO``: run every policy of a scenario and write one results directory."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from testbed.errors import SpecError
from testbed.substrate import SUBSTRATES, substrate_choices


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run a scenario (all its policies) and write results/RUN_ID/")
    p.add_argument("scenario", help="scenario YAML file")
    kinds = " | ".join(f"{name} ({SUBSTRATES.get(name).help})" for name in SUBSTRATES)
    p.add_argument("--substrate", default="sim",
                   help=f"{kinds} | auto (netns where the machine allows, else sim; says which and why)")
    p.add_argument("--out", type=Path, default=None, help="results directory (default results/NAME-sSEED-TIME)")
    p.add_argument("--seed", default=None, help="override the scenario's seed")
    p.add_argument("--force", action="store_true", help="replace --out if it holds earlier testbed results (nothing else is ever replaced)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    # Load and validate first, check --out, and only then import the runner (numpy, pandas,
    # matplotlib, the substrates): a bad scenario or --out is refused at once.
    from testbed.spec import load_scenario

    known = substrate_choices()
    if args.substrate not in known:
        from testbed.cli.parser import did_you_mean

        raise SpecError([("--substrate", f"unknown substrate {args.substrate!r}{did_you_mean(args.substrate, known)} "
                                         f"(known: {', '.join(known)})")])
    seed = None
    if args.seed is not None:
        try:
            seed = int(args.seed)
        except ValueError:
            raise SpecError([("--seed", f"must be a non-negative integer (got {args.seed!r})")]) from None
        if seed < 0 or seed >= 2**63:
            raise SpecError([("--seed", f"must be a non-negative integer below 2**63 (got {seed})")])
    try:
        loaded = load_scenario(args.scenario)
        if args.out is not None:
            from testbed.recorder.out_dir import check_out_dir

            check_out_dir(args.out, kind="run", force=args.force, protect=(loaded.path,))
        from testbed.runner import run_scenario

        out = run_scenario(loaded, out_dir=args.out, substrate=args.substrate, seed=seed,
                           progress=not args.no_progress, force=args.force, argv=sys.argv)
    except SpecError as e:  # a problem of the scenario: name its file first, as `validate` does
        raise e.in_file(args.scenario) from None
    print((out / "comparison.md").read_text(encoding="utf-8"))
    print(f"results: {out}")
    return 0
