"""``testbed doctor [--json]``: what this machine can emulate, and what each missing piece means.

Always exits 0: doctor reports, it does not fail (an internal error still raises).
"""

from __future__ import annotations

import argparse
import json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("doctor", help="probe what this machine can emulate (netns, qdiscs, Mininet, Docker, GPUs)")
    p.add_argument("--json", action="store_true", help='print {"schema_version", "capabilities", "summary"} as JSON')
    p.add_argument("--no-root-probes", action="store_true",
                   help="skip the probes that make namespaces, qdiscs or cgroups (they report 'not probed')")
    p.set_defaults(func=_doctor)


def _doctor(args: argparse.Namespace) -> int:
    from testbed.doctor import capabilities
    from testbed.doctor.report import render, summarize, to_json
    from testbed.netem.owned.naming import new_run_id
    from testbed.substrate.registry import doctor_checks

    run_id = new_run_id()
    caps = capabilities(need_root_probes=not args.no_root_probes, run_id=run_id)
    summary = summarize(caps, run_id, doctor_checks())  # a line per registered substrate and node runtime
    print(json.dumps(to_json(caps, summary), indent=2) if args.json else render(caps, summary))
    return 0
