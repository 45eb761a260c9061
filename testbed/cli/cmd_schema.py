"""``testbed schema``: the scenario JSON Schema (point your editor's YAML plugin at it)."""

from __future__ import annotations

import argparse
import json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("schema", help="print the scenario JSON Schema")
    p.add_argument("--topology", action="store_true", help="the topology-file schema instead")
    p.set_defaults(func=_schema)


def _schema(args: argparse.Namespace) -> int:
    from testbed.spec.scenario import Scenario
    from testbed.spec.topology import Topology

    model = Topology if args.topology else Scenario
    schema = model.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    print(json.dumps(schema, indent=2, sort_keys=True))
    return 0
