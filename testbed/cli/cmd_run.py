"""``testbed run SCENARIO``: run every policy of a scenario and write one results directory
(a thin layer over :func:`testbed.api.run`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from testbed.cli import figure_options
from testbed.cli.choices import SubstrateChoices
from testbed.errors import SpecError
from testbed.substrate import SUBSTRATES


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run a scenario (all its policies) and write results/RUN_ID/")
    p.add_argument("scenario", help="scenario YAML file")
    kinds = " | ".join(f"{name} ({SUBSTRATES.get(name).help})" for name in SUBSTRATES)
    p.add_argument("--substrate", choices=SubstrateChoices(), default="sim",
                   help=f"{kinds} | auto (netns where the machine allows, else sim; says which and why)")
    p.add_argument("--out", type=Path, default=None, help="results directory (default results/NAME-sSEED-TIME)")
    p.add_argument("--seed", default=None, help="override the scenario's seed")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="PATH=VALUE",
                   help="override one scenario field by its dotted path, as sweeps do (repeatable): "
                        "--set duration_h=12 --set 'policies[feasibility_aware].alpha=0.2'; the value is "
                        "read as YAML; the result is validated like the file, saved as the results' "
                        "scenario.yaml, and the file itself is kept beside it (scenario.original.yaml)")
    p.add_argument("--force", action="store_true", help="replace --out if it holds earlier testbed results (nothing else is ever replaced)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar or progress lines")
    p.add_argument("--no-plots", action="store_true",
                   help="skip the figures (*.png; most of a short sim run's time); every table is written all the same")
    figure_options.add(p)
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    # Load and validate first, check --out, and only then import the runner (numpy, pandas,
    # matplotlib, the substrates): a bad scenario or --out is refused at once.
    from testbed.api import check_seed, check_substrate, parse_set, prepare, run_prepared

    check_substrate(args.substrate, "--substrate")
    seed = check_seed(args.seed, "--seed")
    overrides = parse_set(args.overrides)
    figures = figure_options.applied(args)  # a bad format or style is refused here, named by its option
    try:
        prepared = prepare(args.scenario, overrides, where="--set")
        with figures:
            out = run_prepared(prepared, out=args.out, substrate=args.substrate, seed=seed, force=args.force,
                               progress=not args.no_progress, plots=not args.no_plots, argv=sys.argv)
    except SpecError as e:  # a problem of the scenario: name its file first, as `validate` does
        raise e.in_file(args.scenario) from None
    print((out / "comparison.md").read_text(encoding="utf-8"))
    print(f"results: {out}")
    print(f"page: {out / 'index.html'}")
    return 0
