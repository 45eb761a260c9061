"""``testbed validate FILE``: exit 0 if the scenario is valid, else 2 with one line per problem."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("validate", help="check a scenario file (exit 2 and one line per problem if invalid)")
    p.add_argument("scenario", nargs="+", help="scenario YAML file(s)")
    p.set_defaults(func=_validate)


def _validate(args: argparse.Namespace) -> int:
    from testbed.spec import load_scenario

    for path in args.scenario:
        loaded = load_scenario(path)
        sc = loaded.scenario
        print(f"{path}: ok ({len(sc.sites)} sites, {len(sc.links)} links, {len(sc.policies)} policies, "
              f"{sc.duration_h:g} h at {sc.step_s:g} s steps)")
    return 0
